//! `mur-roost`: flags, the two startup lines, then the event loop.

use murmur::cli::Args;
use murmur::roost::flags;
use std::net::{Ipv4Addr, TcpListener};
use std::process::ExitCode;

const BIN: &str = "mur-roost";

fn main() -> ExitCode {
    let config = match flags::parse(Args::new(std::env::args().skip(1))) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{BIN}: {e}");
            eprintln!("run '{BIN} --help' for usage");
            return ExitCode::from(2);
        }
    };
    if config.help || config.version {
        let text = if config.help {
            murmur::commands::help::text(&murmur::commands::help::ROOST).to_string()
        } else {
            format!("{BIN} {}\n", murmur::VERSION)
        };
        return match murmur::diag::write_stdout(&text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(d) => {
                eprintln!("{BIN}: {d}");
                ExitCode::from(1)
            }
        };
    }
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, config.port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{BIN}: cannot listen on 127.0.0.1:{}: {e}", config.port);
            return ExitCode::from(1);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(config.port);
    // The two lines are for whoever started the daemon; one who closed stdout still gets a
    // daemon, told on stderr that the lines could not be written.
    let lines = format!(
        "{BIN}: listening on 127.0.0.1:{port}\n{BIN}: machine ceiling {} live capsules (--max-live-capsules)\n",
        config.max_live_capsules
    );
    if let Err(d) = murmur::diag::write_stdout(&lines) {
        eprintln!("{BIN}: {d}");
    }
    if let Err(e) = murmur::roost::serve(listener, config) {
        eprintln!("{BIN}: event loop failed: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
