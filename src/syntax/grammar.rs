//! The LR(1) parser that lalrpop generates from `grammar/teg.lalrpop` (`build.rs` writes it to
//! `OUT_DIR`). It lives in this one module, which both the whole-file parse (`parser`) and the
//! recovery of op headers (`recover`, through the `OpBody` and `PortAlone` entry points) import.

use lalrpop_util::lalrpop_mod;

lalrpop_mod!(
    #[allow(clippy::all, clippy::pedantic, unused)]
    pub(super) teg
);
