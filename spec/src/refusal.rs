//! A refusal as the client reads it: the status it answers with and what its body must hold,
//! resolved from the contract once (an `error` refusal's status lives in `[[errors]]`). The
//! checks judge a single reply by it and the load generator every answer of a run, so both tell
//! a refusal from any other answer by the same rule, and say why in the same words.

use crate::model::{Refusal, RefusalBody};
use crate::{Contract, ErrorCode};

/// A refusal's answer: its status, and what its body holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusalAnswer {
    /// The status answered.
    pub status: u16,
    /// What the body must hold.
    pub body: AnswerBody,
}

/// What a refusal's body must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerBody {
    /// An error of the contract's `[[errors]]` table: a problem+json body with this `code`.
    Problem(ErrorCode),
    /// A bare status's declared shape (a JSON string at a pointer, a text, a page containing
    /// one).
    Shape(RefusalBody),
    /// A bare status whose body the contract leaves open.
    Any,
}

impl RefusalAnswer {
    /// How an answer (`status`, `body`) differs from this refusal, in words; `None` when it is
    /// the refusal.
    pub fn mismatch(&self, status: u16, body: &[u8]) -> Option<String> {
        let want = self.status;
        match &self.body {
            AnswerBody::Problem(code) => {
                let json: serde_json::Value =
                    serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
                let found = json["code"].as_str().unwrap_or_default();
                (status != want || found != code.as_str()).then(|| {
                    format!("answered {status} {found}, not the refusal's {want} `{code}`")
                })
            }
            _ if status != want => Some(format!("answered {status}, not the refusal's {want}")),
            AnswerBody::Shape(shape) => shape
                .mismatch(body)
                .map(|why| format!("answered {status}, the refusal's status, but {why}")),
            AnswerBody::Any => None,
        }
    }

    /// The refusal in a few words, as an expectation names it (`503 \`overloaded\``,
    /// ``429 with the body `"busy\n"` ``).
    pub fn words(&self) -> String {
        match &self.body {
            AnswerBody::Problem(code) => format!("{} `{code}`", self.status),
            AnswerBody::Shape(shape) => format!("{} with {}", self.status, shape.words()),
            AnswerBody::Any => self.status.to_string(),
        }
    }
}

impl Contract {
    /// How `refusal` reads as an answer; None for a refusal of neither an error nor a status
    /// (which validation refuses) or an error the table lacks (which the loader refuses).
    pub fn refusal_answer(&self, refusal: &Refusal) -> Option<RefusalAnswer> {
        let status = self.refusal_status(refusal)?;
        let body = match (refusal.error, &refusal.body) {
            (Some(code), _) => AnswerBody::Problem(code),
            (None, Some(shape)) => AnswerBody::Shape(shape.clone()),
            (None, None) => AnswerBody::Any,
        };
        Some(RefusalAnswer { status, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AnswerCode, BodyText};

    fn bare(status: u16, body: Option<RefusalBody>) -> RefusalAnswer {
        let body = body.map_or(AnswerBody::Any, AnswerBody::Shape);
        RefusalAnswer { status, body }
    }

    #[test]
    fn a_problem_refusal_needs_its_status_and_its_code() {
        let c = Contract::embedded();
        let refusal = &c.refusals[c.pools["digitize"].refusal.as_ref().unwrap()];
        let answer = c.refusal_answer(refusal).unwrap();
        let body = br#"{"code":"overloaded"}"#;
        assert_eq!(answer.mismatch(answer.status, body), None);
        let wrong = answer
            .mismatch(answer.status, br#"{"code":"timeout"}"#)
            .unwrap();
        assert!(wrong.contains("not the refusal's"), "{wrong}");
        assert!(answer.mismatch(500, body).is_some());
    }

    #[test]
    fn a_bare_refusal_needs_its_status_and_its_declared_shape() {
        let any = bare(429, None);
        assert_eq!(any.mismatch(429, b"whatever"), None);
        assert_eq!(
            any.mismatch(503, b"").as_deref(),
            Some("answered 503, not the refusal's 429")
        );
        let text = bare(
            503,
            Some(RefusalBody::Text(BodyText {
                text: "busy".into(),
            })),
        );
        assert_eq!(text.mismatch(503, b"busy"), None);
        assert!(
            text.mismatch(503, b"idle")
                .unwrap()
                .contains("the refusal's status, but")
        );
        let json = bare(
            429,
            Some(RefusalBody::Json(AnswerCode {
                pointer: "/error".into(),
                value: "slow_down".into(),
            })),
        );
        assert_eq!(json.mismatch(429, br#"{"error":"slow_down"}"#), None);
        assert!(json.mismatch(429, b"{}").is_some());
        assert_eq!(
            json.words(),
            "429 with a JSON body whose `/error` is `\"slow_down\"`"
        );
    }
}
