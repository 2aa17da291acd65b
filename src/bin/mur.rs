//! `mur`: argument parsing and dispatch to the subcommands, nothing else.

use murmur::cli::{no_value, Arg, ArgError, Args};
use std::process::ExitCode;

const BIN: &str = "mur";

const HELP: &str = "\
mur - run murmur capsules inside enforced containment

usage: mur <command> [options]

commands:
  help        print this help
  version     print the version

options:
  -h, --help      print this help
  -V, --version   print the version
";

enum Command {
    Help,
    Version,
}

fn parse(mut args: Args) -> Result<Command, ArgError> {
    let command = match args.next_arg() {
        None => Command::Help,
        Some(Arg::Word(w)) if w == "help" => Command::Help,
        Some(Arg::Word(w)) if w == "version" => Command::Version,
        Some(Arg::Flag { name, inline }) if name == "--help" || name == "-h" => {
            no_value(&name, inline)?;
            Command::Help
        }
        Some(Arg::Flag { name, inline }) if name == "--version" || name == "-V" => {
            no_value(&name, inline)?;
            Command::Version
        }
        Some(Arg::Flag {
            name,
            inline: Some(v),
        }) => return Err(ArgError::Unknown(format!("{name}={v}"))),
        Some(Arg::Flag { name, inline: None } | Arg::Word(name)) => return Err(ArgError::Unknown(name)),
    };
    if let Some(extra) = args.next_arg() {
        let text = match extra {
            Arg::Flag {
                name,
                inline: Some(v),
            } => format!("{name}={v}"),
            Arg::Flag { name, inline: None } | Arg::Word(name) => name,
        };
        return Err(ArgError::Unknown(text));
    }
    Ok(command)
}

fn main() -> ExitCode {
    match parse(Args::new(std::env::args().skip(1))) {
        Ok(Command::Help) => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Ok(Command::Version) => {
            println!("{BIN} {}", murmur::VERSION);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{BIN}: {e}");
            eprintln!("run 'mur --help' for usage");
            ExitCode::from(2)
        }
    }
}
