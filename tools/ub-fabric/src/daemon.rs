// SPDX-License-Identifier: GPL-2.0
//! The daemon: builds the fabric from a topology, serves every controller
//! over vfio-user (one thread each, re-listening after a disconnect),
//! serves the control socket, and steps the fabric with the monotonic
//! clock.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::device::Interrupts;
use crate::fabric::Fabric;
use crate::mem::{GuestMemory, MappedMemory};
use crate::topology::Topology;
use crate::vfio::{self, Backend, Clock, EventfdIrqs, Kick};

/// Daemon errors.
#[derive(Debug, Error)]
pub enum DaemonError {
    /// Socket directory.
    #[error("socket directory {0}: {1}")]
    SocketDir(PathBuf, std::io::Error),
    /// Thread start.
    #[error("starting a thread: {0}")]
    Thread(std::io::Error),
}

/// Daemon settings.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Topology.
    pub topology: Topology,
    /// Directory of the vfio-user sockets without an explicit path.
    pub socket_dir: PathBuf,
    /// Control socket.
    pub control: PathBuf,
    /// Fabric step period.
    pub tick: Duration,
}

/// A started daemon: every server thread runs; the fabric is shared.
#[derive(Debug, Clone)]
pub struct Running {
    /// The fabric.
    pub fabric: Arc<Mutex<Fabric>>,
    /// Its clock.
    pub clock: Clock,
    /// Wakes the stepping thread on BAR writes.
    pub kick: Kick,
}

/// Starts the vfio-user servers and the control socket (threads) and
/// returns; the caller steps the fabric (see [`start_backend`]).
pub fn spawn(cfg: &DaemonConfig) -> anyhow::Result<Running> {
    std::fs::create_dir_all(&cfg.socket_dir)
        .map_err(|e| DaemonError::SocketDir(cfg.socket_dir.clone(), e))?;
    let clock = Clock(Instant::now());
    let topo = cfg.topology.clone();
    let mut handles: Vec<(MappedMemory, EventfdIrqs, u16)> = Vec::new();
    for h in &topo.hosts {
        let vectors = ub_proto::controller::msix_vectors(h.ports);
        handles.push((MappedMemory::default(), EventfdIrqs::new(vectors), vectors));
    }
    let fabric = Fabric::new(&topo, |i| {
        let (m, q, _) = &handles[i];
        (
            Box::new(m.clone()) as Box<dyn GuestMemory>,
            Box::new(q.clone()) as Box<dyn Interrupts>,
        )
    });
    let fabric = Arc::new(Mutex::new(fabric));
    let kick = Kick::default();
    for (i, h) in topo.hosts.iter().enumerate() {
        let (mem, irqs, vectors) = handles[i].clone();
        let path = vfio::socket_path(&cfg.socket_dir, &h.name, h.socket.as_ref());
        // Bind before returning, so that clients can connect at once.
        vfio::remove_stale_socket(&path)?;
        let server = vfio_user::Server::new(&path, true, vfio::irqs(vectors), vfio::regions())
            .map_err(|e| anyhow::anyhow!("vfio-user server on {}: {e}", path.display()))?;
        let backend =
            Backend::new(Arc::clone(&fabric), i, mem, irqs, vectors, clock).with_kick(kick.clone());
        std::thread::Builder::new()
            .name(format!("vfio-{}", h.name))
            .spawn(move || vfio::serve_forever(&path, &server, backend))
            .map_err(DaemonError::Thread)?;
    }
    {
        crate::vfio::remove_stale_socket(&cfg.control)?;
        let listener = std::os::unix::net::UnixListener::bind(&cfg.control)?;
        let fabric = Arc::clone(&fabric);
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || crate::control::serve_listener(listener, fabric, clock))
            .map_err(DaemonError::Thread)?;
    }
    Ok(Running {
        fabric,
        clock,
        kick,
    })
}

/// While idle (nothing in flight or queued), the daemon sleeps this long
/// between steps unless a BAR write wakes it.
pub const IDLE_SLEEP: Duration = Duration::from_millis(2);

/// Runs the daemon until killed: [`spawn`], then step the fabric every
/// `tick` with the monotonic clock (every [`IDLE_SLEEP`] or at the next
/// BAR write while idle).
pub fn start_backend(cfg: DaemonConfig) -> anyhow::Result<()> {
    let run = spawn(&cfg)?;
    let topo = &cfg.topology;
    eprintln!(
        "ub-fabric: {} hosts, {} switches, {} links; control socket {}",
        topo.hosts.len(),
        topo.switches.len(),
        topo.links.len(),
        cfg.control.display()
    );
    run.kick.register();
    loop {
        let busy = match run.fabric.lock() {
            Ok(mut f) => {
                f.step(run.clock.now());
                f.busy()
            }
            Err(_) => anyhow::bail!("fabric lock poisoned"),
        };
        if busy {
            std::thread::sleep(cfg.tick);
        } else {
            std::thread::park_timeout(IDLE_SLEEP);
        }
    }
}
