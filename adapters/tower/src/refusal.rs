//! The answer to a hook the layer cannot honour: `400` with an RFC 9457 body naming the
//! directive, the same code (`invalid_parameter`) the reference server answers a malformed hook
//! with, so the checker reads both alike.

use http::header::CONTENT_TYPE;
use http::{HeaderName, HeaderValue, Response, StatusCode};
use plimsoll_spec::{ErrorCode, PROBLEM_CONTENT_TYPE};

/// Why a hook header was not honoured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The directive as the answer quotes it.
    pub(crate) directive: String,
    /// What was wrong with it.
    pub(crate) detail: String,
}

impl Refusal {
    /// The `400` answer; `header` is named in the title so a reader knows which field to fix.
    pub(crate) fn response<B: From<String>>(&self, header: &HeaderName) -> Response<B> {
        let code = ErrorCode::InvalidParameter;
        let status = StatusCode::BAD_REQUEST;
        let body = serde_json::json!({
            "type": code.type_uri(),
            "title": format!("The test hook in `{header}` cannot be honoured"),
            "status": status.as_u16(),
            "detail": self.detail,
            "error": self.detail,
            "code": code.as_str(),
            "directive": self.directive,
        });
        let mut response = Response::new(B::from(body.to_string()));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_CONTENT_TYPE));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_problem_json_naming_the_directive() {
        let refusal = Refusal {
            directive: "fail=decode".into(),
            detail: "no".into(),
        };
        let response: Response<String> =
            refusal.response(&HeaderName::from_static("x-plimsoll-hook"));
        assert_eq!(response.status(), 400);
        assert_eq!(response.headers()[CONTENT_TYPE], PROBLEM_CONTENT_TYPE);
        let body: serde_json::Value = serde_json::from_str(response.body()).unwrap();
        assert_eq!(body["directive"], "fail=decode");
        assert_eq!(body["status"], 400);
        assert_eq!(body["code"], "invalid_parameter");
        assert_eq!(body["type"], "urn:plimsoll:error:invalid_parameter");
    }
}
