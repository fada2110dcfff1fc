// SPDX-License-Identifier: GPL-2.0
//! The control socket: a Unix stream socket taking one JSON command per
//! line ([`Command`]) and answering one JSON line, `{"ok":true,...}` or
//! `{"ok":false,"error":"..."}`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::fabric::{Command, Fabric};
use crate::vfio::Clock;

/// Handles one request line against the fabric.
pub fn handle_line(fabric: &Mutex<Fabric>, line: &str, now: u64) -> Value {
    let cmd: Command = match serde_json::from_str(line) {
        Ok(c) => c,
        Err(e) => return json!({"ok": false, "error": format!("bad command: {e}")}),
    };
    let Ok(mut f) = fabric.lock() else {
        return json!({"ok": false, "error": "fabric lock poisoned"});
    };
    match f.apply(&cmd, now) {
        Ok(Value::Object(mut m)) => {
            m.entry("ok").or_insert(Value::Bool(true));
            Value::Object(m)
        }
        Ok(v) => json!({"ok": true, "result": v}),
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    }
}

fn serve_conn(fabric: &Mutex<Fabric>, stream: UnixStream, clock: Clock) -> std::io::Result<()> {
    let mut out = stream.try_clone()?;
    for line in BufReader::new(stream).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = handle_line(fabric, &line, clock.now());
        writeln!(out, "{answer}")?;
    }
    Ok(())
}

/// Serves a bound control socket forever (a thread per client).
pub fn serve_listener(listener: UnixListener, fabric: Arc<Mutex<Fabric>>, clock: Clock) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let fabric = Arc::clone(&fabric);
        std::thread::spawn(move || {
            let _ = serve_conn(&fabric, stream, clock);
        });
    }
}

/// Sends one command to a running daemon and returns its answer.
pub fn request(path: &Path, cmd: &Command) -> anyhow::Result<Value> {
    let mut s = UnixStream::connect(path)
        .map_err(|e| anyhow::anyhow!("control socket {}: {e}", path.display()))?;
    writeln!(s, "{}", serde_json::to_string(cmd)?)?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    Ok(serde_json::from_str(&line)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RecordingIrqs;
    use crate::mem::FakeMemory;
    use crate::topology::Topology;

    #[test]
    fn commands_and_errors() {
        let topo = Topology::builtin("default").expect("topology");
        let f = Mutex::new(Fabric::new(&topo, |_| {
            (
                Box::new(FakeMemory::new(0, 64)) as Box<dyn crate::mem::GuestMemory>,
                Box::new(RecordingIrqs::default()) as Box<dyn crate::device::Interrupts>,
            )
        }));
        let v = handle_line(&f, r#"{"cmd":"counters"}"#, 0);
        assert_eq!(v["hosts"].as_array().map(Vec::len), Some(2));
        let v = handle_line(&f, r#"{"cmd":"link","link":"sw0.2","ber":1e-6}"#, 0);
        assert_eq!(v["ok"], true, "{v}");
        let v = handle_line(&f, r#"{"cmd":"switch","switch":"sw1","drop":0.5}"#, 0);
        assert_eq!(v["faults"]["drop"], 0.5);
        let v = handle_line(
            &f,
            r#"{"cmd":"hostile","port":"vm1.1","case":"done-len-too-long","count":3}"#,
            0,
        );
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["hostile"]["armed"]["done-len-too-long"], 3, "{v}");
        let v = handle_line(
            &f,
            r#"{"cmd":"hostile","port":"vm0.0","case":"irq-storm"}"#,
            0,
        );
        assert_eq!(v["armed"], 1, "count defaults to 1: {v}");
        let v = handle_line(&f, r#"{"cmd":"counters"}"#, 0);
        let port = &v["hosts"][1]["ports"][1]["hostile"];
        assert_eq!(port["armed"]["done-len-too-long"], 3, "{port}");
        assert_eq!(port["injected"]["done-len-too-long"], 0, "{port}");
        assert_eq!(
            v["hosts"][0]["ports"][0]["hostile"]["armed"]["irq-storm"],
            1
        );
        for bad in [
            "not json",
            r#"{"cmd":"link","link":"vm9.0"}"#,
            r#"{"cmd":"switch","switch":"sw0","drop":2}"#,
            r#"{"cmd":"link","link":"vm0.0","rate_fps":-1}"#,
            r#"{"cmd":"hostile","port":"vm0.0","case":"no-such-case"}"#,
            r#"{"cmd":"hostile","port":"vm0.0"}"#,
            r#"{"cmd":"hostile","port":"vm0.2","case":"irq-storm"}"#,
            r#"{"cmd":"hostile","port":"vm7.0","case":"irq-storm"}"#,
            r#"{"cmd":"hostile","port":"sw0.0","case":"irq-storm"}"#,
            r#"{"cmd":"hostile","port":"vm0","case":"irq-storm"}"#,
            r#"{"cmd":"hostile","port":"vm0.0","case":"irq-storm","count":-1}"#,
            r#"{"cmd":"hostile","port":"vm0.0","case":"irq-storm","count":1000001}"#,
            r#"{"cmd":"hostile","port":"vm0.0","case":"irq-storm","extra":1}"#,
        ] {
            let before = handle_line(&f, r#"{"cmd":"counters"}"#, 0);
            let v = handle_line(&f, bad, 0);
            assert_eq!(v["ok"], false, "{bad}");
            assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
            let after = handle_line(&f, r#"{"cmd":"counters"}"#, 0);
            assert_eq!(before, after, "{bad} changed nothing");
        }
        let v = handle_line(
            &f,
            r#"{"cmd":"hostile","port":"vm0.0","case":"no-such-case"}"#,
            0,
        );
        let e = v["error"].as_str().unwrap_or_default();
        assert!(e.contains("garbage-flits"), "names the cases: {e}");
        let v = handle_line(
            &f,
            r#"{"cmd":"hostile","port":"sw0.0","case":"irq-storm"}"#,
            0,
        );
        let e = v["error"].as_str().unwrap_or_default();
        assert!(e.contains("sw0.0"), "names the port: {e}");
    }

    fn fabric() -> Mutex<Fabric> {
        let topo = Topology::builtin("default").expect("topology");
        Mutex::new(Fabric::new(&topo, |_| {
            (
                Box::new(FakeMemory::new(0, 64)) as Box<dyn crate::mem::GuestMemory>,
                Box::new(RecordingIrqs::default()) as Box<dyn crate::device::Interrupts>,
            )
        }))
    }

    /// A `link` command refused for a bad PHY value used to have set the
    /// NPI rewriting it also asked for (found by the `fabric_control` fuzz
    /// target's "a refused command changes nothing").
    #[test]
    fn refused_link_command_changes_no_npi() {
        let f = fabric();
        let npis = |f: &Mutex<Fabric>| {
            let f = f.lock().expect("lock");
            let p = &f.switches[0].ports[0];
            format!("{:?}/{:?}", p.npi_ingress, p.npi_egress)
        };
        let before = npis(&f);
        for bad in [
            r#"{"cmd":"link","link":"vm0.0","npi_ingress":16,"ber":2}"#,
            r#"{"cmd":"link","link":"vm0.0","npi_egress":16,"fec_fail":-1}"#,
            r#"{"cmd":"link","link":"sw0.0","npi_ingress":16,"rate_fps":0}"#,
        ] {
            let v = handle_line(&f, bad, 0);
            assert_eq!(v["ok"], false, "{bad}: {v}");
            assert_eq!(npis(&f), before, "{bad} changed the NPI rewriting");
        }
        let v = handle_line(&f, r#"{"cmd":"link","link":"vm0.0","npi_ingress":16}"#, 0);
        assert_eq!(v["ok"], true, "{v}");
        assert_ne!(npis(&f), before);
    }

    /// A delay or a line rate that puts an arrival past u64::MAX
    /// nanoseconds used to overflow in `Wire::send` (a panic with overflow
    /// checks) once the link carried a flit (found by the
    /// `fabric_control` fuzz target).
    #[test]
    fn huge_delay_or_tiny_rate_does_not_overflow() {
        for cmd in [
            r#"{"cmd":"link","link":"sw0.2","delay_ns":18446744073709551615}"#,
            r#"{"cmd":"link","link":"sw0.2","rate_fps":1e-300}"#,
        ] {
            let f = fabric();
            let v = handle_line(&f, cmd, 0);
            assert_eq!(v["ok"], true, "{cmd}: {v}");
            let mut f = f.lock().expect("lock");
            // The inter-switch link comes up and its engines send.
            for t in 1..50u64 {
                f.step(t * 100_000);
            }
            let sw = f.counters();
            let link = sw["links"]
                .as_array()
                .and_then(|l| l.iter().find(|l| l["a"] == "sw0.2" || l["b"] == "sw0.2"))
                .cloned()
                .unwrap_or_default();
            assert!(
                link["a_to_b"]["flits"].as_u64().unwrap_or(0) > 0,
                "{cmd}: {link}"
            );
        }
    }
}
