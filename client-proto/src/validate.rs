//! Finite-number validation of decoded messages, naming the offending field.
//!
//! Decoding only checks the wire shape. A JSON or binary message may still carry
//! `NaN` or `±inf` in an `f32` field (binary can encode them; JSON cannot, but
//! an in-memory message built by a client can). [`Validate::validate`] reports
//! the first such field with its path, e.g. `behaviors[2].behavior.slow_radius`.

use thiserror::Error;

/// A field that failed validation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("field `{field}`: {reason}")]
pub struct FieldError {
    /// Path of the field, e.g. `behaviors[2].behavior.slow_radius`.
    pub field: String,
    /// Why it was rejected.
    pub reason: String,
}

/// A dotted field path under construction (`a.b[3].c`).
#[derive(Debug, Default, Clone)]
pub struct FieldPath(String);

impl FieldPath {
    /// Runs `f` with `name` appended to the path, then restores the path.
    pub fn field<R>(&mut self, name: &str, f: impl FnOnce(&mut Self) -> R) -> R {
        let len = self.0.len();
        if !self.0.is_empty() {
            self.0.push('.');
        }
        self.0.push_str(name);
        let r = f(self);
        self.0.truncate(len);
        r
    }

    /// Runs `f` with `[index]` appended to the path, then restores the path.
    pub fn index<R>(&mut self, index: usize, f: impl FnOnce(&mut Self) -> R) -> R {
        let len = self.0.len();
        self.0.push('[');
        self.0.push_str(&index.to_string());
        self.0.push(']');
        let r = f(self);
        self.0.truncate(len);
        r
    }

    /// An error at the current path.
    pub fn error(&self, reason: impl Into<String>) -> FieldError {
        FieldError { field: self.0.clone(), reason: reason.into() }
    }
}

/// Checks that every number in a message is finite.
pub trait Validate {
    /// Validates `self`, reporting errors relative to `path`.
    fn validate_at(&self, path: &mut FieldPath) -> Result<(), FieldError>;

    /// Validates `self`; the error names the field path from `self`.
    fn validate(&self) -> Result<(), FieldError> {
        self.validate_at(&mut FieldPath::default())
    }
}

impl Validate for f32 {
    fn validate_at(&self, path: &mut FieldPath) -> Result<(), FieldError> {
        if self.is_finite() {
            Ok(())
        } else {
            Err(path.error(format!("must be a finite number, got {self}")))
        }
    }
}

impl<T: Validate> Validate for Option<T> {
    fn validate_at(&self, path: &mut FieldPath) -> Result<(), FieldError> {
        self.as_ref().map_or(Ok(()), |v| v.validate_at(path))
    }
}

impl<T: Validate> Validate for Vec<T> {
    fn validate_at(&self, path: &mut FieldPath) -> Result<(), FieldError> {
        self.iter()
            .enumerate()
            .try_for_each(|(i, v)| path.index(i, |p| v.validate_at(p)))
    }
}

/// Checks that `v` is finite and in `(0, max]` (or `[0, max]` when `zero_ok`), naming the
/// field at `path`.
pub fn check_range(path: &mut FieldPath, v: f32, zero_ok: bool, max: f32) -> Result<(), FieldError> {
    v.validate_at(path)?;
    let low_ok = if zero_ok { v >= 0.0 } else { v > 0.0 };
    if low_ok && v <= max {
        Ok(())
    } else {
        let low = if zero_ok { "[0" } else { "(0" };
        Err(path.error(format!("must be in {low}, {max}], got {v}")))
    }
}

/// Types without floating-point content are always valid.
macro_rules! always_valid {
    ($($t:ty),* $(,)?) => {
        $( impl $crate::validate::Validate for $t {
            fn validate_at(
                &self,
                _: &mut $crate::validate::FieldPath,
            ) -> Result<(), $crate::validate::FieldError> {
                Ok(())
            }
        } )*
    };
}
pub(crate) use always_valid;

always_valid!(u8, u16, u32, u64, i16, i32, bool, String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_names_nested_index_and_field() {
        let v: Vec<Option<f32>> = vec![Some(1.0), None, Some(f32::NAN)];
        let mut p = FieldPath::default();
        let err = p.field("xs", |p| v.validate_at(p)).unwrap_err();
        assert_eq!(err.field, "xs[2]");
        assert!(err.reason.contains("finite"));
        // The path is restored after use.
        assert_eq!(p.0, "");
        assert_eq!(f32::INFINITY.validate().unwrap_err().field, "");
        assert!(vec![Some(0.0f32)].validate().is_ok());
    }
}
