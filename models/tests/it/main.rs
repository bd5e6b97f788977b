//! Integration tests of the model definitions and configs. One binary.

mod config;
mod weights;
