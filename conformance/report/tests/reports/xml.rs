//! A strict XML well-formedness check for the JUnit file and the inline SVG pictures, kept
//! strict on purpose (a general XML reader accepts more than the reports may produce).

/// A strict XML well-formedness check: one root, balanced and matching tags, quoted
/// attributes without `<`, and every `&` a known entity or character reference.
pub fn well_formed(xml: &str) -> Result<(), String> {
    fn entity_ok(rest: &str) -> Result<usize, String> {
        let end = rest.find(';').ok_or("unterminated &")?;
        let name = &rest[1..end];
        let ok = matches!(name, "amp" | "lt" | "gt" | "quot" | "apos")
            || name
                .strip_prefix("#x")
                .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
            || name
                .strip_prefix('#')
                .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
        if ok {
            Ok(end + 1)
        } else {
            Err(format!("bad entity &{name};"))
        }
    }
    fn text_ok(text: &str) -> Result<(), String> {
        let mut i = 0;
        while let Some(p) = text[i..].find('&') {
            i += p;
            i += entity_ok(&text[i..])?;
        }
        if text.contains('>') && text.contains("]]>") {
            return Err("]]> in text".into());
        }
        Ok(())
    }
    let is_name = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
            && !s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
    };

    let mut stack: Vec<&str> = Vec::new();
    let mut roots = 0;
    let mut rest = xml;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            text_ok(rest)?;
            if !rest.trim().is_empty() && stack.is_empty() {
                return Err("text outside the root".into());
            }
            break;
        };
        let text = &rest[..lt];
        text_ok(text)?;
        if !text.trim().is_empty() && stack.is_empty() {
            return Err(format!("text outside the root: {text:?}"));
        }
        rest = &rest[lt..];
        if let Some(r) = rest.strip_prefix("<?") {
            let end = r.find("?>").ok_or("unterminated <?")?;
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix("<!--") {
            let end = r.find("-->").ok_or("unterminated comment")?;
            rest = &r[end + 3..];
        } else if let Some(r) = rest.strip_prefix("<![CDATA[") {
            let end = r.find("]]>").ok_or("unterminated CDATA")?;
            rest = &r[end + 3..];
        } else if let Some(r) = rest.strip_prefix("</") {
            let end = r.find('>').ok_or("unterminated end tag")?;
            let name = r[..end].trim_end();
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            rest = &r[end + 1..];
        } else {
            let r = &rest[1..];
            let name_end = r
                .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
                .ok_or("unterminated tag")?;
            let name = &r[..name_end];
            if !is_name(name) {
                return Err(format!("bad tag name {name:?}"));
            }
            let mut a = &r[name_end..];
            let mut seen = Vec::new();
            let self_closing;
            loop {
                a = a.trim_start();
                if let Some(after) = a.strip_prefix("/>") {
                    self_closing = true;
                    a = after;
                    break;
                }
                if let Some(after) = a.strip_prefix('>') {
                    self_closing = false;
                    a = after;
                    break;
                }
                let eq = a
                    .find('=')
                    .ok_or(format!("attribute without value in <{name}>"))?;
                let attr = a[..eq].trim();
                if !is_name(attr) || seen.contains(&attr) {
                    return Err(format!("bad or repeated attribute {attr:?} in <{name}>"));
                }
                seen.push(attr);
                let v = a[eq + 1..].trim_start();
                let quote = v.chars().next().ok_or("eof in attribute")?;
                if quote != '"' && quote != '\'' {
                    return Err(format!("unquoted attribute {attr} in <{name}>"));
                }
                let close = v[1..].find(quote).ok_or("unterminated attribute")?;
                let value = &v[1..1 + close];
                if value.contains('<') {
                    return Err(format!("< in attribute {attr}"));
                }
                text_ok(value)?;
                a = &v[close + 2..];
            }
            if stack.is_empty() {
                roots += 1;
            }
            if !self_closing {
                stack.push(name);
            }
            rest = a;
        }
    }
    if !stack.is_empty() {
        return Err(format!("unclosed {stack:?}"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(())
}

#[test]
fn the_well_formedness_check_rejects_broken_xml() {
    assert!(well_formed("<a><b x=\"1\">t &amp; u</b><c/></a>").is_ok());
    for broken in [
        "<a><b></a></b>",
        "<a>x & y</a>",
        "<a b=\"<\"/>",
        "<a b=1/>",
        "<a>",
        "<a/><b/>",
        "<a>&bogus;</a>",
        "<a x=\"1\" x=\"2\"/>",
    ] {
        assert!(well_formed(broken).is_err(), "accepted {broken}");
    }
}
