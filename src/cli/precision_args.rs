//! How `hlatc opt` and `hlatc plan` read `--precision` and `--rounding`
//! (the commands that build a step read them by the option table).

use hlatc::passes::RoundingPolicy;
use hlatc::precision::Precision;

pub(super) fn parse_precision(s: &str) -> Result<Precision, String> {
    Precision::from_name(s).ok_or_else(|| {
        let known: Vec<&str> = Precision::ALL.iter().map(|p| p.name()).collect();
        format!("unknown precision '{s}' (known: {})", known.join(", "))
    })
}

pub(super) fn parse_rounding(s: &str) -> Result<RoundingPolicy, String> {
    RoundingPolicy::from_name(s).ok_or_else(|| {
        format!(
            "unknown rounding policy '{s}' (known: {})",
            RoundingPolicy::NAMES.join(", ")
        )
    })
}
