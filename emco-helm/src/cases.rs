//! The table runner of the template and function tests, in the manner of Go's `exec_test.go`.

use crate::template::{TemplateLimits, Templates};
use crate::value::Value;

/// (template, expected output, or `Err(substring)` of the expected error)
pub(crate) type Case<'a> = (&'a str, Result<&'a str, &'a str>);

/// Runs each case on fresh data from `data` (cases may change maps with `set`/`unset`) and
/// fails with every case that did not answer as expected.
pub(crate) fn check_on(data: fn() -> Value, cases: &[Case<'_>]) {
    let mut failures = Vec::new();
    for (src, want) in cases {
        let mut set = Templates::new();
        let got = set
            .add("t", src)
            .and_then(|()| set.execute("t", &data(), &TemplateLimits::default()))
            .map_err(|e| e.to_string());
        let ok = match (want, &got) {
            (Ok(w), Ok(g)) => w == g,
            (Err(w), Err(g)) => g.contains(w),
            _ => false,
        };
        if !ok {
            failures.push(format!("{src:?}: want {want:?}, got {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
