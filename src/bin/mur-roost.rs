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
    if config.help {
        print!("{}", murmur::commands::help::text(&murmur::commands::help::ROOST));
        return ExitCode::SUCCESS;
    }
    if config.version {
        println!("{BIN} {}", murmur::VERSION);
        return ExitCode::SUCCESS;
    }
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, config.port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{BIN}: cannot listen on 127.0.0.1:{}: {e}", config.port);
            return ExitCode::from(1);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(config.port);
    println!("{BIN}: listening on 127.0.0.1:{port}");
    println!(
        "{BIN}: machine ceiling {} live capsules (--max-live-capsules)",
        config.max_live_capsules
    );
    if let Err(e) = murmur::roost::serve(listener, config) {
        eprintln!("{BIN}: event loop failed: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
