//! `mur-roost`: flags, the startup lines, then the event loop.

use murmur::cli::{no_value, Arg, ArgError, Args};
use std::net::{Ipv4Addr, TcpListener};
use std::process::ExitCode;

const BIN: &str = "mur-roost";

struct Flags {
    port: u16,
    version: bool,
}

fn parse(mut args: Args) -> Result<Flags, ArgError> {
    let mut flags = Flags {
        port: 7700,
        version: false,
    };
    while let Some(arg) = args.next_arg() {
        match arg {
            Arg::Flag { name, inline } if name == "--port" => flags.port = args.number(&name, inline)?,
            Arg::Flag { name, inline } if name == "--version" => {
                no_value(&name, inline)?;
                flags.version = true;
            }
            Arg::Flag {
                name,
                inline: Some(v),
            } => return Err(ArgError::Unknown(format!("{name}={v}"))),
            Arg::Flag { name, inline: None } | Arg::Word(name) => return Err(ArgError::Unknown(name)),
        }
    }
    Ok(flags)
}

fn main() -> ExitCode {
    let flags = match parse(Args::new(std::env::args().skip(1))) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{BIN}: {e}");
            return ExitCode::from(2);
        }
    };
    if flags.version {
        println!("{BIN} {}", murmur::VERSION);
        return ExitCode::SUCCESS;
    }
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, flags.port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{BIN}: cannot listen on 127.0.0.1:{}: {e}", flags.port);
            return ExitCode::from(1);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(flags.port);
    println!("{BIN}: listening on 127.0.0.1:{port}");
    if let Err(e) = murmur::roost::serve(listener) {
        eprintln!("{BIN}: event loop failed: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
