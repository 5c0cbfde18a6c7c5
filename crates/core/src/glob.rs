//! Tool-name globs for role policy and classification: `*` is any run of
//! characters, `?` one character; everything else is literal.

/// Does `name` match `pattern`?
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
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
    p[pi..].iter().all(|c| *c == '*')
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
