//! What iperf3's flags change about `run` (of every kind: wirebench's plan, `--iperf3`,
//! `--perf-server`) before its first socket: `-A` the CPU, `-B` and `-S` every client socket,
//! `--logfile` and `-T` where the output goes. The JSON lines of `--json-stream` as the plan's
//! runs go are `run::lines`.

use anyhow::{Context as _, Result};

use crate::config::RunOutput;
use crate::transport::{net, process};

/// What stays set up while the command runs: the output's redirection, undone when dropped.
#[derive(Debug)]
pub struct Prepared {
    _redirect: Option<process::Redirect>,
}

/// Sets up the process for `run` as iperf3's flags ask. `text`: the output is text (a title
/// then prefixes its lines; JSON carries it instead).
pub fn prepare(out: &RunOutput, text: bool) -> Result<Prepared> {
    if let Some(cpu) = out.cpu {
        process::pin_to_cpu(cpu).context("-A/--affinity")?;
    }
    if out.bind.is_some() || out.tos.is_some() || out.dont_fragment {
        net::set_client_sockets(net::ClientSockets {
            source: out.bind,
            tos: out.tos,
            dont_fragment: out.dont_fragment,
        });
    }
    let prefix = out.title.clone().filter(|_| text);
    let redirect = if out.logfile.is_some() || prefix.is_some() {
        Some(process::Redirect::new(out.logfile.as_deref(), prefix)?)
    } else {
        None
    };
    Ok(Prepared {
        _redirect: redirect,
    })
}
