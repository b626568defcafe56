//! The server a client command (`run`, `ping`, `rr`, `rpm`) starts in-process on loopback when
//! no `--server` is given, and how the server is named in what the command prints. Owns only
//! that start and its name; the commands own what they do with the server.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::flows::server::{Server, ServerEvent, ServerOptions};
use crate::runner::Target;
use crate::transport::tls::ServerIdentity;

/// A task that is aborted when this is dropped: the embedded server ends with its command.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<Result<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The server a client command talks to: where its traffic goes, how it is named, and the
/// embedded server's task when one was started.
pub struct ServerLink {
    /// The target's address, or the embedded server's (a free loopback port).
    pub addr: SocketAddr,
    /// How the server is named in output: as typed (with its address when that differs), or
    /// `embedded ADDR`.
    pub name: String,
    /// The embedded server, which ends when this is dropped; `None` for a remote server.
    pub embedded: Option<AbortOnDrop>,
}

/// Where the command's traffic goes: the target's address, or an embedded server started on
/// the target's loopback address (a free port) requiring `psk` when given; named for output.
/// With `events`, the embedded server's session lines go there; without, they are dropped.
pub async fn server_for(
    target: &Target,
    psk: Option<std::sync::Arc<wirebench_core::security::auth::Psk>>,
    events: Option<mpsc::UnboundedSender<ServerEvent>>,
) -> Result<ServerLink> {
    let (addr, embedded) = match target {
        Target::Remote { addr, .. } => (*addr, None),
        Target::Embedded(ip) => {
            let options = ServerOptions {
                psk,
                ..ServerOptions::default()
            };
            let server = Server::bind(
                SocketAddr::new(*ip, 0),
                ServerIdentity::self_signed()?,
                options,
            )
            .await
            .context("while starting the embedded server")?;
            let addr = server.local_addr();
            let task = match events {
                Some(tx) => tokio::spawn(server.run(tx)),
                None => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tokio::spawn(async move {
                        let _keep = rx;
                        server.run(tx).await
                    })
                }
            };
            (addr, Some(AbortOnDrop(task)))
        }
    };
    let name = match target {
        Target::Remote { name, addr } if *name == addr.to_string() => name.clone(),
        Target::Remote { name, addr } => format!("{name} ({addr})"),
        Target::Embedded(_) => format!("embedded {addr}"),
    };
    Ok(ServerLink {
        addr,
        name,
        embedded,
    })
}
