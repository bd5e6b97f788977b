//! Integration tests of the model definitions, configs and families, and
//! of how parameters are split over ranks and pipeline stages. One binary.

mod config;
mod experts;
mod families;
mod kernels;
mod pipeline_stages;
mod rope;
mod tp_split;
mod weights;
