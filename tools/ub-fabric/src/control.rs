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
}
