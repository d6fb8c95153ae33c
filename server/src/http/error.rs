//! REST errors: `{"error": code, "message": text}` with a fitting status.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use steer_proto::ErrorCode;

use crate::runtime::{CmdError, RegistryError};
use crate::sim::SimError;
use crate::store::StoreError;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code.
    pub code: &'static str,
    /// Human message (names the field where there is one).
    pub message: String,
}

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError { status, code: code.name(), message: message.into() }
    }

    /// 400 bad_request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message)
    }

    /// 422 invalid_field.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::InvalidField, message)
    }

    /// 404 not_found.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(serde_json::json!({"error": self.code, "message": self.message}))).into_response()
    }
}

impl From<CmdError> for ApiError {
    fn from(e: CmdError) -> Self {
        match &e {
            CmdError::Sim(s) => s.clone().into(),
            CmdError::Forbidden(_) | CmdError::NotAllowed(_) => ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, e.to_string()),
            CmdError::Quota(_) => ApiError::new(StatusCode::TOO_MANY_REQUESTS, ErrorCode::QuotaExceeded, e.to_string()),
            CmdError::Busy(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Busy, e.to_string()),
            CmdError::Dead(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Internal, e.to_string()),
            CmdError::Invalid(m) => ApiError::invalid(m.clone()),
            CmdError::ReadOnly(m) => ApiError::new(StatusCode::CONFLICT, ErrorCode::Forbidden, m.clone()),
            CmdError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, ErrorCode::BadRequest, m.clone()),
            CmdError::Moving(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Busy, e.to_string()),
        }
    }
}

impl From<SimError> for ApiError {
    fn from(e: SimError) -> Self {
        match &e {
            SimError::InvalidField { .. } | SimError::LimitExceeded { .. } => ApiError::invalid(e.to_string()),
            SimError::UnknownAgent(_) => ApiError::new(StatusCode::NOT_FOUND, ErrorCode::UnknownAgent, e.to_string()),
            _ => ApiError::not_found(e.to_string()),
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::BadName(_) => ApiError::bad_request(e.to_string()),
            RegistryError::Exists(_) => ApiError::new(StatusCode::CONFLICT, ErrorCode::BadRequest, e.to_string()),
            RegistryError::Unknown(_) => ApiError::new(StatusCode::NOT_FOUND, ErrorCode::UnknownWorld, e.to_string()),
            RegistryError::TooMany(_) => ApiError::invalid(e.to_string()),
            RegistryError::Start(c) => c.into(),
            RegistryError::Unrecovered(..) => ApiError::new(StatusCode::CONFLICT, ErrorCode::BadRequest, e.to_string()),
            RegistryError::Moved(..) => ApiError::new(StatusCode::GONE, ErrorCode::UnknownWorld, e.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::BadName => ApiError::bad_request(e.to_string()),
            StoreError::NotFound(_) => ApiError::not_found(e.to_string()),
            StoreError::ReadOnly(_) => ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, e.to_string()),
            StoreError::Scenario(_) => ApiError::invalid(e.to_string()),
            StoreError::TooLarge => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::TooLarge, e.to_string()),
            StoreError::Io(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal, e.to_string()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, r.body_text())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let status = r.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            ErrorCode::TooLarge
        } else if status == StatusCode::UNPROCESSABLE_ENTITY {
            ErrorCode::InvalidField
        } else {
            ErrorCode::BadRequest
        };
        ApiError::new(status, code, r.body_text())
    }
}
