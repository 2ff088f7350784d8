//! The example uploads of `/v1/digitize` in the OpenAPI document: one real image per accepted
//! media type, a red disc on white, 16×16 pixels (made once with Pillow: PNG optimised, baseline
//! JPEG at quality 90). `ci/openapi-judges.sh` posts each to the reference server and expects a
//! design back, so an example the server cannot digitize fails CI.

/// The PNG example, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAAAUUlEQVR42mP8//8/AymAiYFEwIIpdFJeE842f3gdTZYR2UnISpEBsjYmgqrRpEj2AxNB49EUkGsD7TVghjeukKXASXgsQZZixEx8JCQNmoQSAArRIROV1jLvAAAAAElFTkSuQmCC";

/// The JPEG example, base64.
const JPEG: &str = "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4RDgsLEBYQERMUFRUVDA8XGBYUGBIUFRT/2wBDAQMEBAUEBQkFBQkUDQsNFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBT/wAARCAAQABADASIAAhEBAxEB/8QAFQABAQAAAAAAAAAAAAAAAAAAAAj/xAAgEAACAgEDBQAAAAAAAAAAAAABAgMEBgUIEgAHERMz/8QAFQEBAQAAAAAAAAAAAAAAAAAABQf/xAAiEQABAgMJAAAAAAAAAAAAAAAREhMAFGEWJCZBQoGCkdH/2gAMAwEAAhEDEQA/AKJ3h7w8g7ZZg+EYQ9Srer1o5dQ1SaAyzV5XKyJFGjj1/PiSxDgibwOLIT02ebw8g7m5gmEZu9S1esVpJdP1SGAxTWJULSPFIiD1/PkQwCACHweTOD03h7PMg7m5g+b4QlS1esVo4tQ0uacxTWJUKxpLG7n1/PiCpKACHyOTOR02ebPMg7ZZgmb5ulSrer1pItP0uGcyzV5XLRvLI6H1/PkAoLgibyeLIB0He5vNJ2HsWLDVmtL6aOODtJ4prH//2Q==";

/// What the examples show.
pub(super) const SUMMARY: &str = "A red disc on white, 16×16 pixels";

/// The example image for an upload media type as a `data:` URI (an Example Object's
/// `externalValue`: raw bytes have no JSON spelling), if there is one for that type.
pub(super) fn data_uri(media_type: &str) -> Option<String> {
    let base64 = match media_type {
        "image/png" => PNG,
        "image/jpeg" => JPEG,
        _ => return None,
    };
    Some(format!("data:{media_type};base64,{base64}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_carry_their_format_signature() {
        // base64 of the PNG signature (89 50 4E 47 0D 0A 1A 0A) and of a JPEG's SOI + APP0 marker.
        assert!(PNG.starts_with("iVBORw0KGgo"));
        assert!(JPEG.starts_with("/9j/4AAQ"));
        for b64 in [PNG, JPEG] {
            assert_eq!(b64.len() % 4, 0);
            assert!(
                b64.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
            );
        }
        assert!(data_uri("image/gif").is_none());
    }
}
