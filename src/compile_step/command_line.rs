//! [`CompileOptions`] as the `hlatc compile` command line that builds
//! them: what the planner prints for each layout and what the memory fit
//! suggests, written from the options themselves rather than spelled by
//! hand beside them. Every option that differs from its default is
//! written, in the order of [`super::spellings::SPELLINGS`], so the same
//! options always give the same words; `tests/it/command_line.rs` holds
//! the list to every spelled option, and `hlatc compile` of the words to
//! the library's own bundle of the options.

use super::{CompileOptions, ModelSource, ReplicaGroupForm};
use hlatc_train::memory_plan::DeviceMemory;

/// Options no command line can give.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unspellable {
    /// A model given as JSON text or as a config already read, not by a
    /// preset's name or a file's path.
    #[error("{0} is not a preset or a config.json on disk, so no command line names it")]
    Model(String),
}

impl CompileOptions {
    /// The arguments after `hlatc compile` (without `--out`) that build
    /// these options.
    pub fn command_line(&self) -> Result<Vec<String>, Unspellable> {
        let d = CompileOptions::default();
        let mut w = Words::default();
        match &self.model {
            ModelSource::Preset(name) => w.value("model", name),
            ModelSource::ConfigFile(path) => w.value("config", path.display()),
            ModelSource::ConfigJson { name, .. } | ModelSource::Config { name, .. } => {
                return Err(Unspellable::Model(name.clone()))
            }
        }
        w.some("batch-size", self.batch_size);
        w.some("seq-len", self.seq_len);
        w.switch("packed", self.packed);
        w.switch("separate-projections", self.separate_projections);
        w.some("capacity-factor", self.capacity_factor);
        w.changed("precision", self.precision.name(), d.precision.name());
        w.some("rounding", self.rounding.as_ref());
        w.changed("target", self.target.name(), d.target.name());
        w.some("chip", self.chip);
        if let Some(passes) = &self.passes {
            w.value("passes", passes.join(","));
        }
        for p in &self.disable_passes {
            w.value("disable-pass", p);
        }
        w.switch("verify-each-pass", self.verify_each_pass);
        w.changed("remat", self.remat.name(), d.remat.name());
        let (p, dp) = (&self.parallel, &d.parallel);
        w.changed("tp", p.tp, dp.tp);
        w.changed("dp", p.dp, dp.dp);
        w.changed("pp", p.pp, dp.pp);
        w.changed("ep", p.ep, dp.ep);
        w.changed("ep-exchange", p.ep_exchange.name(), dp.ep_exchange.name());
        w.switch("sequence-parallel", p.sequence_parallel);
        w.switch("zero1", p.zero1);
        let o = &self.optimizer;
        w.some("lr-max", o.lr_max);
        w.some("lr-min", o.lr_min);
        w.some("warmup-steps", o.warmup_steps);
        w.some("total-steps", o.total_steps);
        w.some("beta1", o.beta1);
        w.some("beta2", o.beta2);
        w.some("adam-eps", o.adam_eps);
        w.some("weight-decay", o.weight_decay);
        w.some("clip-norm", o.clip_norm);
        w.switch("module-markers", self.module_markers);
        match self.device_memory {
            DeviceMemory::TargetDefault => {}
            DeviceMemory::Bytes(b) => w.value("device-memory", b),
            DeviceMemory::Unchecked => w.value("device-memory", "none"),
        }
        w.changed("grad-accum", self.grad_accum, d.grad_accum);
        w.some("spmd", self.spmd.map(|s| s.name()));
        w.some("rank-source", self.rank_source.map(|r| r.name()));
        if self.replica_groups != ReplicaGroupForm::default() {
            w.value("replica-groups", self.replica_groups.name());
        }
        w.some("pp-send", self.pp_send.map(|s| s.name()));
        for k in &self.kernels {
            w.value("kernel", k);
        }
        Ok(w.0)
    }

    /// The flags that turn `from` into these options, as a user would add
    /// them to `from`'s command (`--zero1 --remat full-layer`): every
    /// option of these options' command line that `from`'s lacks or
    /// gives another value. The model is not compared (a change of layout
    /// keeps it, and a model given as JSON has no words).
    pub fn command_line_change(&self, from: &CompileOptions) -> String {
        let words = |o: &CompileOptions| {
            let o = CompileOptions {
                model: ModelSource::Preset(String::new()),
                ..o.clone()
            };
            options_of(&o.command_line().unwrap_or_default())
        };
        let (now, before) = (words(self), words(from));
        now.into_iter()
            .filter(|w| !before.contains(w))
            .map(|(flag, value)| match value {
                Some(v) => format!("{flag} {}", shell_word(&v)),
                None => flag,
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// [`CompileOptions::command_line`] as one line, each word quoted
    /// where a shell would split or expand it.
    pub fn command_line_text(&self) -> Result<String, Unspellable> {
        Ok(self
            .command_line()?
            .iter()
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" "))
    }
}

/// The words, as they are written.
#[derive(Default)]
struct Words(Vec<String>);

impl Words {
    fn value(&mut self, flag: &str, v: impl std::fmt::Display) {
        self.0.push(format!("--{flag}"));
        self.0.push(v.to_string());
    }

    fn some(&mut self, flag: &str, v: Option<impl std::fmt::Display>) {
        if let Some(v) = v {
            self.value(flag, v);
        }
    }

    fn switch(&mut self, flag: &str, on: bool) {
        if on {
            self.0.push(format!("--{flag}"));
        }
    }

    fn changed<T: PartialEq + std::fmt::Display>(&mut self, flag: &str, v: T, default: T) {
        if v != default {
            self.value(flag, v);
        }
    }
}

/// Words as options: each flag with the value that follows it, if one
/// does.
fn options_of(words: &[String]) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for w in words {
        match out.last_mut() {
            Some((_, value @ None)) if !w.starts_with("--") => *value = Some(w.clone()),
            _ => out.push((w.clone(), None)),
        }
    }
    out
}

/// `w` as a shell reads it back: bare when it is made of characters no
/// shell treats specially, else in single quotes.
fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=.,:/+@%".contains(c));
    match plain {
        true => w.to_string(),
        false => format!("'{}'", w.replace('\'', r"'\''")),
    }
}
