//! `plimsoll contract`: `upgrade`, a language-1 document rewritten in language 2, then read back
//! by the loader, so what it writes is a contract this build accepts or the reason it is not;
//! and `lint`, a document read as `check --contract` reads it, every placeholder `plimsoll init`
//! left ([`plimsoll_spec::draft`]) and every broken rule named with its line.

use plimsoll_spec::upgrade::upgrade;
use plimsoll_spec::{Contract, ContractError};

use crate::args::contract::{ContractAction, ContractArgs, LintArgs, UpgradeArgs};

/// Runs a `plimsoll contract` action; returns the exit code.
pub(crate) fn run(args: ContractArgs) -> u8 {
    match args.action {
        ContractAction::Upgrade(args) => run_upgrade(args),
        ContractAction::Lint(args) => run_lint(args),
    }
}

/// 0: a contract `check --contract` accepts, no placeholder left; 1: placeholders left or rules
/// broken, each on a line of stdout with its line in the file; 2: the file cannot be read, or
/// is not TOML at all.
fn run_lint(args: LintArgs) -> u8 {
    let origin = args.file.display().to_string();
    let refused = match Contract::from_file(&args.file) {
        Ok(_) => {
            println!(
                "{origin}: a contract in language {}, no placeholder left",
                plimsoll_spec::model::LANGUAGE
            );
            return 0;
        }
        Err(e) => e,
    };
    match refused {
        ContractError::Io { .. } | ContractError::TooLarge { .. } => {
            eprintln!("plimsoll contract lint: {refused}");
            2
        }
        ContractError::Syntax { ref message, .. } if !is_toml(&args.file) => {
            eprintln!("plimsoll contract lint: {origin} is not TOML: {message}");
            2
        }
        ContractError::Draft { placeholders, .. } => {
            for p in &placeholders {
                println!("{origin}:{}: `{}`: to fill in: {}", p.line, p.field, p.todo);
            }
            eprintln!(
                "plimsoll contract lint: {origin}: {} placeholder(s) left by `plimsoll init` \
                 (each a string starting with {:?}): replace each with its value; the \
                 contract's other rules are judged once none is left",
                placeholders.len(),
                plimsoll_spec::draft::PLACEHOLDER
            );
            1
        }
        ContractError::Invalid { violations, .. } => {
            for v in &violations {
                match v.line {
                    Some(line) => println!("{origin}:{line}: `{}`: {}", v.field, v.message),
                    None => println!("{origin}: `{}`: {}", v.field, v.message),
                }
            }
            eprintln!(
                "plimsoll contract lint: {origin}: {} rule(s) broken",
                violations.len()
            );
            1
        }
        ContractError::Syntax { .. } | ContractError::Language1 { .. } => {
            println!("{refused}");
            1
        }
    }
}

/// Whether the file parses as TOML at all, apart from the contract's shape.
fn is_toml(path: &std::path::Path) -> bool {
    std::fs::read_to_string(path)
        .is_ok_and(|text| plimsoll_spec::draft::placeholders(&text).is_ok())
}

/// 0: written, and valid in language 2; 1: written, but it breaks a rule of language 2 (each is
/// named); 2: unreadable, or not a language-1 document.
fn run_upgrade(args: UpgradeArgs) -> u8 {
    let origin = args.file.display().to_string();
    let text = match std::fs::read_to_string(&args.file) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("plimsoll contract upgrade: cannot read {origin}: {e}");
            return 2;
        }
    };
    let upgraded = match upgrade(&text) {
        Ok(upgraded) => upgraded,
        Err(e) => {
            eprintln!("plimsoll contract upgrade: {origin}: {e}");
            return 2;
        }
    };
    let written = match &args.output {
        Some(path) => {
            std::fs::write(path, &upgraded).map_err(|e| format!("{}: {e}", path.display()))
        }
        None => {
            print!("{upgraded}");
            Ok(())
        }
    };
    if let Err(e) = written {
        eprintln!("plimsoll contract upgrade: cannot write the upgraded document: {e}");
        return 2;
    }
    eprintln!(
        "plimsoll contract upgrade: {origin} rewritten in contract language {}; its comments are not carried over, and its `version` is yours to bump",
        plimsoll_spec::model::LANGUAGE
    );
    match Contract::from_toml(&upgraded, &format!("{origin} (upgraded)")) {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("plimsoll contract upgrade: {e}");
            1
        }
    }
}
