//! Text from the server under test made to fit a terminal line: flattened to one line, then cut
//! (a check line) or wrapped (the header and summary), counted in characters, not bytes.

/// Flattens text to one line and drops control characters: values come from the server under
/// test, and a stray newline or escape sequence must not break (or hijack) the terminal layout.
pub(super) fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last_space = false;
    for c in text.chars() {
        let c = if c.is_whitespace() || c.is_control() {
            ' '
        } else {
            c
        };
        if c == ' ' {
            if !last_space && !out.is_empty() {
                out.push(' ');
            }
            last_space = true;
        } else {
            out.push(c);
            last_space = false;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

pub(super) fn chars(text: &str) -> usize {
    text.chars().count()
}

/// Cuts `text` to at most `width` characters, marking the cut with `…`.
pub(super) fn truncate(text: &str, width: usize) -> String {
    if chars(text) <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Word-wraps `text` (one line already) into lines of at most `width` characters, the first
/// starting after `first` characters already on the line and the rest after `indent` spaces.
/// A word longer than a line is split, never cut: every character of `text` is kept.
pub fn wrap(text: &str, first: usize, indent: usize, width: usize) -> Vec<String> {
    let room = |line: usize| {
        let used = if line == 0 { first } else { indent };
        width.saturating_sub(used).max(20)
    };
    let mut lines: Vec<String> = vec![String::new()];
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let at = lines.len() - 1;
            let current = chars(&lines[at]);
            let gap = usize::from(current > 0);
            if current + gap + word.len() <= room(at) {
                if gap == 1 {
                    lines[at].push(' ');
                }
                lines[at].extend(word.iter());
                break;
            }
            if current == 0 {
                // Longer than a whole line: split it.
                let rest = word.split_off(room(at));
                lines[at].extend(word.iter());
                word = rest;
            }
            lines.push(String::new());
        }
    }
    let pad = " ".repeat(indent);
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| if i == 0 { l } else { format!("{pad}{l}") })
        .collect()
}
