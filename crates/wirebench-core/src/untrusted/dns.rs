//! Harness for what a DNS resolver sends back to `wirebench dns` and the exporter's dns probe:
//! owns feeding arbitrary bytes to the response checks (the question's verdict, the ID, the
//! answer lines a run shows and stores) and checking that nothing panics and no answer line
//! carries a control character; must not do I/O.

use super::cursor::Cursor;
use crate::wire::dns::{answer_lines, response_id, IdMap, Question};

/// Record types a question may ask for; the input's first byte picks one.
const TYPES: [&str; 5] = ["A", "AAAA", "TXT", "MX", "CNAME"];

/// Checks `data` as a response: first byte the question's type, two bytes an ID base, the rest
/// the response.
pub fn dns_response(data: &[u8]) {
    let mut input = Cursor::new(data);
    let rtype = TYPES[usize::from(input.u8()) % TYPES.len()];
    let map = IdMap::new(input.u16());
    let response = input.bytes(usize::MAX);
    let Ok(question) = Question::new("example.org", rtype) else {
        panic!("a fixed question must build");
    };
    let _ = question.check(response);
    if let Some(id) = response_id(response) {
        // Any ID maps to at most one sequence number issued so far, and back to itself.
        if let Some(seq) = map.seq_of(id, 1 << 20) {
            assert_eq!(map.id_of(seq), id, "the ID map does not round-trip");
        }
    }
    for line in answer_lines(response) {
        assert!(
            crate::vocab::text::is_safe(&line),
            "an answer line a run shows is not safe: {line:?}"
        );
    }
}
