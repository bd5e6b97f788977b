//! Building programs: the graph [`builder`] with value numbering, the
//! provenance [`scope`]s it records in `metadata.op_name`, and reverse-mode
//! [`autodiff`] over what it built, and the
//! [`blocked_attention`] whose backward autodiff takes as a whole.

pub mod autodiff;
pub mod blocked_attention;
pub mod builder;
pub mod collectives;
pub mod looped_attention;
pub mod loops;
pub mod module_markers;
pub mod ring_attention;
pub mod scope;
