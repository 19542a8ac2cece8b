//! Usage and budgets (issue 23): what an agent's harness recorded of its tokens (read by the
//! history thread from the session's own file) is kept on the agent; with a budget, at 80 % the
//! user is told, at 100 % volee interrupts the agent's turn with its profile's interrupt key and
//! holds it `needs_you` ("budget reached: N of M tokens") — `volee send` is refused — until
//! `volee budget ID +AMOUNT|off`.

use volee_core::{Millis, Observation};
use volee_protocol::{AgentUsage, Budget, BudgetChange, Response};

use super::request_error::RequestError;
use super::{now_ms, Daemon};
use crate::notify::Kind;

/// Reached: what was used of what, as the agent's evidence says it.
fn reached_evidence(used: u64, limit: u64) -> String {
    format!("budget reached: {used} of {limit} tokens")
}

impl Daemon {
    /// Agent `id`'s harness recorded `usage`: kept, and held against its budget.
    pub(super) fn on_usage(&mut self, id: &str, mut usage: AgentUsage) {
        usage.cost_usd = self.prices.cost(&usage);
        // What it added goes to the ledger (`volee usage`).
        if let Some(a) = self.registry.get(id) {
            if let Some(add) = crate::ledger::added(a.usage.as_ref(), &usage) {
                let entry = crate::ledger::Entry {
                    at: now_ms(),
                    agent: a.id.clone(),
                    name: a.name.clone(),
                    harness: a.harness.clone(),
                    model: usage.model.clone(),
                    project: a.cwd.clone(),
                    input: add.input,
                    output: add.output,
                    cache_read: add.cache_read,
                    cache_write: add.cache_write,
                    requests: add.requests,
                    cost_usd: add.cost_usd,
                };
                if let Err(e) = crate::ledger::append(&self.paths.state_dir, &entry) {
                    tracing::warn!("the usage ledger: {e}");
                }
                // The day's spend on the status lines that show it.
                if let (Some(c), Some((day, usd))) = (entry.cost_usd, self.notices.today.as_mut()) {
                    if *day == super::notifications::local_day_start(entry.at) {
                        *usd += c;
                        self.notices.status_dirty = true;
                    }
                }
            }
        }
        let used = usage.counted();
        let Some((budget, ended)) = self.registry.edit(id, |a| {
            a.usage = Some(usage);
            (a.budget.clone(), a.is_ended())
        }) else {
            return;
        };
        if let (Some(budget), false) = (budget, ended) {
            self.hold_to_budget(id, &budget, used, now_ms());
        }
    }

    /// At 80 % of `budget` a notice (once per limit); at 100 % the turn is interrupted and the
    /// agent held (once, until the budget changes).
    fn hold_to_budget(&mut self, id: &str, budget: &Budget, used: u64, now: Millis) {
        let limit = budget.tokens;
        if used >= limit {
            if budget.reached {
                return;
            }
            self.registry.edit(id, |a| {
                if let Some(b) = a.budget.as_mut() {
                    b.reached = true;
                    b.warned = true;
                }
            });
            let evidence = reached_evidence(used, limit);
            tracing::info!("agent {id}: {evidence}: its turn is interrupted");
            self.registry.observe(
                id,
                Observation::Budget {
                    at: now,
                    hold: Some(evidence),
                },
            );
            self.registry.reevaluate(id, now, &self.arbiter());
            // Its profile's interrupt key, as `volee interrupt` sends it.
            match self.interrupt(id) {
                Ok(work) => {
                    let id = id.to_string();
                    tokio::spawn(async move {
                        if let Err(e) = work.await {
                            tracing::warn!("agent {id}: its turn could not be interrupted: {e:?}");
                        }
                    });
                }
                Err(e) => tracing::warn!("agent {id}: its turn could not be interrupted: {e:?}"),
            }
        } else if used.saturating_mul(5) >= limit.saturating_mul(4) && !budget.warned {
            self.registry.edit(id, |a| {
                if let Some(b) = a.budget.as_mut() {
                    b.warned = true;
                }
            });
            self.notify(id, Kind::Budget, now);
        }
    }

    /// `volee budget ID +N|N|off`: raise, set or take off an agent's budget. Raised past what it
    /// used, a held agent is let go (the user types its next prompt; nothing is typed for them).
    pub(super) fn budget(
        &mut self,
        query: &str,
        change: BudgetChange,
    ) -> Result<Response, RequestError> {
        let agent = self.registry.resolve(query)?;
        let id = agent.id.clone();
        let used = agent.usage.as_ref().map_or(0, AgentUsage::counted);
        let tokens = match (change, &agent.budget) {
            (BudgetChange::Off, _) => None,
            (BudgetChange::Add(n), Some(b)) => Some(b.tokens.saturating_add(n)),
            // No budget yet: N more than it used.
            (BudgetChange::Add(n), None) => Some(used.saturating_add(n)),
            (BudgetChange::Set(n), _) => Some(n),
        };
        if tokens == Some(0) {
            return Err(RequestError::user("a budget of 0 tokens: use off"));
        }
        let budget = tokens.map(|tokens| Budget {
            tokens,
            warned: false,
            reached: false,
        });
        let now = now_ms();
        self.registry.edit(&id, |a| a.budget = budget.clone());
        self.registry.observe(
            &id,
            Observation::Budget {
                at: now,
                hold: None,
            },
        );
        self.registry.reevaluate(&id, now, &self.arbiter());
        let ended = self.registry.get(&id).is_none_or(|a| a.is_ended());
        if let (Some(budget), false) = (budget, ended) {
            self.hold_to_budget(&id, &budget, used, now);
        }
        self.save();
        let agent = self.registry.resolve(&id)?.view();
        Ok(Response::Agent { agent })
    }

    /// Refused while agent `id` is held at its budget: nothing is typed into it.
    pub(super) fn check_not_held(&self, id: &str) -> Result<(), RequestError> {
        let Some(a) = self.registry.get(id) else {
            return Ok(());
        };
        match &a.budget {
            Some(b) if b.reached => Err(RequestError::User {
                message: format!(
                    "agent {} ({}) reached its budget ({} of {} tokens): nothing is typed into it",
                    a.id,
                    a.name,
                    a.usage.as_ref().map_or(0, AgentUsage::counted),
                    b.tokens
                ),
                hints: vec![format!(
                    "raise it: volee budget {} +AMOUNT (e.g. +50k), or take it off: volee budget {} off",
                    a.id, a.id
                )],
            }),
            _ => Ok(()),
        }
    }
}
