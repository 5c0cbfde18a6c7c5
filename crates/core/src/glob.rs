//! Tool-name globs for role policy and classification: `*` is any run of
//! characters, `?` one character; everything else is literal.

/// Does `name` match `pattern`? Tool names are ASCII in practice: those are matched as
/// bytes, without allocating (a rule set is tried on every call).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    if pattern.is_ascii() && name.is_ascii() {
        return matches(pattern.as_bytes(), name.as_bytes());
    }
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    matches(&p, &n)
}

fn matches<T: PartialEq + Copy + Wild>(p: &[T], n: &[T]) -> bool {
    let (mut pi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi].is_one() || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi].is_any() {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| c.is_any())
}

/// The two wildcards, in bytes or chars.
trait Wild {
    fn is_any(&self) -> bool;
    fn is_one(&self) -> bool;
}

impl Wild for u8 {
    fn is_any(&self) -> bool {
        *self == b'*'
    }
    fn is_one(&self) -> bool {
        *self == b'?'
    }
}

impl Wild for char {
    fn is_any(&self) -> bool {
        *self == '*'
    }
    fn is_one(&self) -> bool {
        *self == '?'
    }
}

/// Does any pattern match?
pub fn any_match(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| glob_match(p, name))
}

#[cfg(test)]
mod tests {
    use super::glob_match as m;

    #[test]
    fn stars_questions_and_literals() {
        assert!(m("*", "git_add"));
        assert!(m("git_*", "git_add"));
        assert!(!m("git_*", "gitadd"));
        assert!(m("*_status", "git_status"));
        assert!(m("git_?dd", "git_add"));
        assert!(m("a*b*c", "axxbyyc"));
        assert!(!m("a*b*c", "axxbyy"));
        assert!(m("exact", "exact") && !m("exact", "exactly"));
        assert!(m("", "") && !m("", "x"));
    }
}
