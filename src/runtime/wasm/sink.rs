//! A guest's stdout or stderr, bounded: the guest writes into a pipe, and a host thread
//! copies at most a fixed number of bytes into the log file, notes the truncation once, and
//! drains (discards) the rest, so a guest printing in a loop until its deadline can neither
//! fill the disk nor block on a full pipe. A log write that fails (a full records disk) is
//! reported to the records' health and the copier goes on draining: the guest's run is the
//! same whether or not its output could be kept.

use crate::agent::redact::Stream;
use crate::runtime::records::Watched;
use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::mpsc;
use std::time::Duration;

/// The most bytes of each stream that reach its log.
pub const LOG_CAP: u64 = 8 << 20;

/// A bounded sink in front of `log`: the write end to hand to the guest, and the copier,
/// which ends (and is joined) once every copy of the write end is closed.
pub struct Sink {
    pub write_end: File,
    done: mpsc::Receiver<io::Result<u64>>,
}

impl Sink {
    pub fn new(log: File, cap: u64, watched: Watched) -> io::Result<Sink> {
        Sink::redacting(log, cap, None, watched)
    }

    /// As [`Sink::new`], with every occurrence of `key` blanked out before it is kept.
    pub fn redacting(log: File, cap: u64, key: Option<&[u8]>, watched: Watched) -> io::Result<Sink> {
        let (read_end, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let (tx, done) = mpsc::channel();
        let redactor = key.filter(|k| !k.is_empty()).map(Stream::new);
        std::thread::Builder::new()
            .name("guest-log".into())
            .spawn(move || {
                let _ = tx.send(copy_capped(File::from(read_end), log, cap, redactor, &watched));
            })?;
        Ok(Sink {
            write_end: File::from(write_end),
            done,
        })
    }

    /// Wait for the copier (call after the guest's store, which holds the write end, is
    /// gone); the bytes the guest wrote in all. Should a copy of the write end still be
    /// open somewhere, this gives up after two seconds rather than hang the session.
    pub fn finish(self) -> io::Result<u64> {
        drop(self.write_end);
        self.done
            .recv_timeout(Duration::from_secs(2))
            .unwrap_or_else(|_| Err(io::Error::other("the log copier did not finish")))
    }
}

/// Copy `from` into `to` up to `cap` bytes, then a one-line note, then discard until EOF. A
/// failed write to `to` is reported as `watched` and nothing more is written.
fn copy_capped(
    mut from: File,
    to: File,
    cap: u64,
    mut redactor: Option<Stream>,
    watched: &Watched,
) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 << 10];
    let (mut total, mut kept, mut noted) = (0u64, 0u64, false);
    let mut to = Some(to);
    let mut keep = |bytes: &[u8], log: &mut Option<File>| {
        let Some(to) = log.as_mut() else { return };
        if let Err(e) = keep_capped(bytes, to, cap, &mut kept, &mut noted) {
            watched.failed(&e);
            *log = None;
        }
    };
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        match redactor.as_mut() {
            Some(r) => keep(&r.push(&buf[..n]), &mut to),
            None => keep(&buf[..n], &mut to),
        }
    }
    if let Some(r) = redactor {
        keep(&r.finish(), &mut to);
    }
    Ok(total)
}

/// Write what of `bytes` is within `cap` (`kept` so far), and the truncation note once.
fn keep_capped(bytes: &[u8], to: &mut File, cap: u64, kept: &mut u64, noted: &mut bool) -> io::Result<()> {
    let room = cap.saturating_sub(*kept).min(bytes.len() as u64) as usize;
    if room > 0 {
        to.write_all(&bytes[..room])?;
        *kept += room as u64;
    }
    if room < bytes.len() && !*noted {
        *noted = true;
        writeln!(to, "\n[murmur: output truncated at {cap} bytes]")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_cap_is_drained_not_kept() {
        let dir = std::env::temp_dir().join(format!("murmur-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let health = crate::runtime::records::Health::new(&dir);
        let sink = Sink::new(File::create(&path).unwrap(), 10, health.watch("log")).unwrap();
        let mut w = sink.write_end.try_clone().unwrap();
        for _ in 0..1000 {
            w.write_all(b"0123456789abcdef").unwrap();
        }
        drop(w);
        assert_eq!(sink.finish().unwrap(), 16_000);
        let log = std::fs::read_to_string(&path).unwrap();
        assert_eq!(log, "0123456789\n[murmur: output truncated at 10 bytes]\n");
        assert_eq!(health.incomplete(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
