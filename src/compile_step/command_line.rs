//! [`CompileOptions`] as the `hlatc compile` command line that builds
//! them: what the planner prints for each layout and what the memory fit
//! suggests, written from the options themselves rather than spelled by
//! hand beside them. Every option that differs from its default is
//! written, in the order of [`super::spellings::SPELLINGS`], so the same
//! options always give the same words; `tests/it/command_line.rs` holds
//! the list to every spelled option, and `hlatc compile` of the words to
//! the library's own bundle of the options.

use super::spellings::CompileOption;
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
    /// The options set to other than their defaults, in the order of
    /// [`super::spellings::SPELLINGS`].
    pub fn settings(&self) -> Result<Vec<Setting>, Unspellable> {
        use CompileOption as O;
        let d = CompileOptions::default();
        let mut w = Words::default();
        match &self.model {
            ModelSource::Preset(name) => w.value(O::Model, name),
            ModelSource::ConfigFile(path) => w.value(O::Config, path.display()),
            ModelSource::ConfigJson { name, .. } | ModelSource::Config { name, .. } => {
                return Err(Unspellable::Model(name.clone()))
            }
        }
        w.some(O::BatchSize, self.batch_size);
        w.some(O::SeqLen, self.seq_len);
        w.switch(O::Packed, self.packed);
        w.switch(O::SeparateProjections, self.separate_projections);
        w.some(O::CapacityFactor, self.capacity_factor);
        w.changed(O::Precision, self.precision.name(), d.precision.name());
        w.some(O::Rounding, self.rounding.as_ref());
        w.changed(O::Target, self.target.name(), d.target.name());
        w.some(O::Chip, self.chip);
        if let Some(passes) = &self.passes {
            w.value(O::Passes, passes.join(","));
        }
        for p in &self.disable_passes {
            w.value(O::DisablePass, p);
        }
        w.switch(O::VerifyEachPass, self.verify_each_pass);
        w.changed(O::Remat, self.remat.name(), d.remat.name());
        let (p, dp) = (&self.parallel, &d.parallel);
        w.changed(O::Tp, p.tp, dp.tp);
        w.changed(O::Dp, p.dp, dp.dp);
        w.changed(O::Pp, p.pp, dp.pp);
        w.changed(O::Ep, p.ep, dp.ep);
        w.changed(O::EpExchange, p.ep_exchange.name(), dp.ep_exchange.name());
        w.switch(O::SequenceParallel, p.sequence_parallel);
        w.switch(O::Zero1, p.zero1);
        let o = &self.optimizer;
        w.some(O::LrMax, o.lr_max);
        w.some(O::LrMin, o.lr_min);
        w.some(O::WarmupSteps, o.warmup_steps);
        w.some(O::TotalSteps, o.total_steps);
        w.some(O::Beta1, o.beta1);
        w.some(O::Beta2, o.beta2);
        w.some(O::AdamEps, o.adam_eps);
        w.some(O::WeightDecay, o.weight_decay);
        w.some(O::ClipNorm, o.clip_norm);
        w.switch(O::ModuleMarkers, self.module_markers);
        match self.device_memory {
            DeviceMemory::TargetDefault => {}
            DeviceMemory::Bytes(b) => w.value(O::DeviceMemory, b),
            DeviceMemory::Unchecked => w.value(O::DeviceMemory, "none"),
        }
        w.changed(O::GradAccum, self.grad_accum, d.grad_accum);
        w.some(O::Spmd, self.spmd.map(|s| s.name()));
        w.some(O::RankSource, self.rank_source.map(|r| r.name()));
        if self.replica_groups != ReplicaGroupForm::default() {
            w.value(O::ReplicaGroups, self.replica_groups.name());
        }
        w.some(O::PpSend, self.pp_send.map(|s| s.name()));
        for k in &self.kernels {
            w.value(O::Kernel, k);
        }
        Ok(w.0)
    }

    /// The arguments after `hlatc compile` (without `--out`) that build
    /// these options.
    pub fn command_line(&self) -> Result<Vec<String>, Unspellable> {
        Ok(self.settings()?.iter().flat_map(Setting::words).collect())
    }

    /// The settings that turn `from` into these options, as a user would
    /// add them to `from`'s command (`--zero1 --remat full-layer`): every
    /// setting of these options that `from`'s lacks or gives another
    /// value. The model is not compared (a change of layout keeps it, and
    /// a model given as JSON has no words).
    pub fn change_from(&self, from: &CompileOptions) -> OptionChange {
        let settings = |o: &CompileOptions| {
            let o = CompileOptions {
                model: ModelSource::Preset(String::new()),
                ..o.clone()
            };
            o.settings().unwrap_or_default()
        };
        let (now, before) = (settings(self), settings(from));
        OptionChange(now.into_iter().filter(|s| !before.contains(s)).collect())
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

/// One option set, with its value (`None` for a switch turned on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub option: CompileOption,
    pub value: Option<String>,
}

impl Setting {
    /// As `hlatc compile` takes it: `--tp`, `2`.
    fn words(&self) -> Vec<String> {
        let mut words = vec![self.option.flag()];
        words.extend(self.value.clone());
        words
    }

    /// As `hlatc.compile_step` takes it: `tp=2`, `zero1=True`,
    /// `remat='full-layer'`.
    fn keyword(&self) -> String {
        let value = match &self.value {
            None => "True".to_string(),
            Some(v) if v.parse::<f64>().is_ok() => v.clone(),
            Some(v) => format!("{v:?}"),
        };
        format!("{}={value}", self.option.keyword())
    }
}

/// Settings that change one compile into another.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OptionChange(pub Vec<Setting>);

impl OptionChange {
    /// As flags added to a command: `--remat full-layer --zero1`.
    pub fn flags(&self) -> String {
        let words: Vec<String> = self.0.iter().flat_map(Setting::words).collect();
        words
            .iter()
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// As keywords added to a call: `remat='full-layer', zero1=True`.
    pub fn keywords(&self) -> String {
        self.0
            .iter()
            .map(Setting::keyword)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The settings, as they are made.
#[derive(Default)]
struct Words(Vec<Setting>);

impl Words {
    fn value(&mut self, option: CompileOption, v: impl std::fmt::Display) {
        self.0.push(Setting {
            option,
            value: Some(v.to_string()),
        });
    }

    fn some(&mut self, option: CompileOption, v: Option<impl std::fmt::Display>) {
        if let Some(v) = v {
            self.value(option, v);
        }
    }

    fn switch(&mut self, option: CompileOption, on: bool) {
        if on {
            self.0.push(Setting {
                option,
                value: None,
            });
        }
    }

    fn changed<T: PartialEq + std::fmt::Display>(
        &mut self,
        option: CompileOption,
        v: T,
        default: T,
    ) {
        if v != default {
            self.value(option, v);
        }
    }
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
