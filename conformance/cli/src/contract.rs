//! `plimsoll contract upgrade`: a language-1 document rewritten in language 2, then read back
//! by the loader, so what it writes is a contract this build accepts or the reason it is not.

use plimsoll_spec::Contract;
use plimsoll_spec::upgrade::upgrade;

use crate::args::contract::{ContractAction, ContractArgs, UpgradeArgs};

/// Runs a `plimsoll contract` action; returns the exit code.
pub(crate) fn run(args: ContractArgs) -> u8 {
    match args.action {
        ContractAction::Upgrade(args) => run_upgrade(args),
    }
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
