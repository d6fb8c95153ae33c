//! Errors of the simulation core. Every validation error names the offending field.

use thiserror::Error;

/// Why a command or constructor was refused. The world is unchanged when one is returned.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SimError {
    /// A number is non-finite, negative where it must not be, or absurdly large.
    #[error("invalid field `{field}`: {reason}")]
    InvalidField { field: String, reason: String },
    /// No agent has this id.
    #[error("unknown agent {0}")]
    UnknownAgent(u32),
    /// No obstacle has this id.
    #[error("unknown obstacle {0}")]
    UnknownObstacle(u32),
    /// No wall has this id.
    #[error("unknown wall {0}")]
    UnknownWall(u32),
    /// No group has this name.
    #[error("unknown group `{0}`")]
    UnknownGroup(String),
    /// A count cap would be exceeded.
    #[error("limit exceeded: `{what}` may be at most {max}")]
    LimitExceeded { what: String, max: usize },
}

impl SimError {
    /// An [`SimError::InvalidField`] for `field`.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        SimError::InvalidField { field: field.into(), reason: reason.into() }
    }

    /// The same error with `prefix.` put before the field path (e.g. `groups[2].` + `limits.radius`).
    pub fn within(self, prefix: &str) -> Self {
        match self {
            SimError::InvalidField { field, reason } => {
                let sep = if field.starts_with('[') { "" } else { "." };
                SimError::InvalidField { field: format!("{prefix}{sep}{field}"), reason }
            }
            other => other,
        }
    }
}

/// Largest magnitude any coordinate, speed or parameter may have. Far beyond any game world, yet
/// small enough that squares and sums stay finite in f32.
pub const MAX_MAGNITUDE: f32 = 1.0e6;

/// Checks that `v` is finite and within ±[`MAX_MAGNITUDE`].
pub fn check_finite(field: &str, v: f32) -> Result<f32, SimError> {
    if !v.is_finite() {
        return Err(SimError::invalid(field, format!("must be a finite number, got {v}")));
    }
    if v.abs() > MAX_MAGNITUDE {
        return Err(SimError::invalid(field, format!("magnitude must be at most {MAX_MAGNITUDE}, got {v}")));
    }
    Ok(v)
}

/// Checks that `v` is finite, ≥ 0 and within [`MAX_MAGNITUDE`].
pub fn check_non_negative(field: &str, v: f32) -> Result<f32, SimError> {
    check_finite(field, v)?;
    if v < 0.0 {
        return Err(SimError::invalid(field, format!("must be >= 0, got {v}")));
    }
    Ok(v)
}

/// Checks that `v` is finite, > 0 and within [`MAX_MAGNITUDE`].
pub fn check_positive(field: &str, v: f32) -> Result<f32, SimError> {
    check_finite(field, v)?;
    if v <= 0.0 {
        return Err(SimError::invalid(field, format!("must be > 0, got {v}")));
    }
    Ok(v)
}

/// Largest radius of any neighbour or sweep query (keeps one query's cost bounded).
pub const MAX_QUERY_RADIUS: f32 = 1000.0;

/// Checks a query radius: finite, ≥ 0 and at most [`MAX_QUERY_RADIUS`].
pub fn check_radius(field: &str, v: f32) -> Result<f32, SimError> {
    check_non_negative(field, v)?;
    if v > MAX_QUERY_RADIUS {
        return Err(SimError::invalid(field, format!("must be at most {MAX_QUERY_RADIUS}")));
    }
    Ok(v)
}

/// Checks both coordinates of a point or vector.
pub fn check_vec(field: &str, v: glam::Vec2) -> Result<glam::Vec2, SimError> {
    check_finite(&format!("{field}.x"), v.x)?;
    check_finite(&format!("{field}.y"), v.y)?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_name_the_field_and_reject_bad_numbers() {
        let e = check_positive("limits.radius", f32::NAN).unwrap_err();
        assert!(e.to_string().contains("limits.radius"), "{e}");
        assert!(check_positive("x", 0.0).is_err());
        assert!(check_non_negative("x", -1.0).is_err());
        assert!(check_finite("x", 2.0e6).is_err());
        assert!(check_finite("x", f32::INFINITY).is_err());
        assert_eq!(check_non_negative("x", 0.0), Ok(0.0));
        let e = check_vec("target", glam::Vec2::new(1.0, f32::NEG_INFINITY)).unwrap_err();
        assert!(e.within("behaviors[0]").to_string().contains("behaviors[0].target.y"));
    }
}
