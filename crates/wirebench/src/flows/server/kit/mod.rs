//! The toolbox every session kind (`kinds/`) shares, below the kinds and the dispatcher:
//! control-connection steps, QUIC connection handling, data-path figures, time spans. Holds
//! no session logic of its own and imports no kind.

pub(crate) mod control;
pub(crate) mod data_path;
pub(crate) mod quic;
pub(crate) mod span;
