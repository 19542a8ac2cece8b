//! Usage and budgets (issue 23): what an agent's harness recorded of its tokens (read by the
//! history thread from the session's own file) is kept on the agent; with a budget, at 80 % the
//! user is told, at 100 % volee interrupts the agent's turn with its profile's interrupt key and
//! holds it `needs_you` ("budget reached: N of M tokens") — `volee send` is refused — until
//! `volee budget ID +AMOUNT|off`.

use volee_core::{Millis, Observation};
use volee_protocol::{AgentUsage, Amount, Budget, BudgetChange, Response};

use super::request_error::RequestError;
use super::{now_ms, Daemon};
use crate::notify::Kind;

/// Reached: what was used of what, as the agent's evidence says it ("budget reached: 13785 of
/// 300 tokens", "budget reached: $5.0123 of $5.00").
fn reached_evidence(used: Amount, limit: Amount) -> String {
    match (used, limit) {
        (Amount::Tokens(n), Amount::Tokens(m)) => format!("budget reached: {n} of {m} tokens"),
        (used, limit) => format!("budget reached: {used} of {limit}"),
    }
}

/// What an agent's usage means for its budget.
#[derive(Debug, PartialEq)]
enum Verdict {
    Within,
    /// 80 % and not yet told.
    Near,
    /// Reached and not yet held: hold it, with this evidence.
    Reached(String),
}

fn judge(budget: &Budget, usage: &AgentUsage) -> Verdict {
    let limit = budget.limit();
    let (share, evidence) = match budget.used(usage) {
        Some(used) => (
            used.share_of(&limit).unwrap_or(0.0),
            reached_evidence(used, limit),
        ),
        // Nothing used yet: nothing to count.
        None if usage.counted() == 0 && usage.cache_read == 0 => return Verdict::Within,
        // Money spent at an unknown price: never let it run on unseen.
        None => (
            f64::INFINITY,
            format!(
                "budget of {limit} cannot be counted: no price for model {} (prices.toml); \
                 give it a budget in tokens",
                usage.model.as_deref().unwrap_or("(unknown)")
            ),
        ),
    };
    match share {
        s if s >= 1.0 && budget.reached => Verdict::Within,
        s if s >= 1.0 => Verdict::Reached(evidence),
        s if s >= 0.8 && !budget.warned => Verdict::Near,
        _ => Verdict::Within,
    }
}

/// What `usage` used of `budget`, for messages: "12000 of 300000 tokens", "$1.20 of $5.00",
/// "? of $5.00" (no price for its model).
pub(super) fn used_text(budget: &Budget, usage: Option<&AgentUsage>) -> String {
    let limit = budget.limit();
    match (usage.and_then(|u| budget.used(u)), limit) {
        (Some(Amount::Tokens(n)), Amount::Tokens(m)) => format!("{n} of {m} tokens"),
        (Some(used), limit) => format!("{used} of {limit}"),
        (None, Amount::Tokens(m)) => format!("0 of {m} tokens"),
        (None, limit) => format!("? of {limit}"),
    }
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
        let Some((budget, ended)) = self.registry.edit(id, |a| {
            a.usage = Some(usage.clone());
            (a.budget.clone(), a.is_ended())
        }) else {
            return;
        };
        if let (Some(budget), false) = (budget, ended) {
            self.hold_to_budget(id, &budget, &usage, now_ms());
        }
    }

    /// At 80 % of `budget` a notice (once per limit); at 100 % the turn is interrupted and the
    /// agent held (once, until the budget changes). A budget in money for a model without a
    /// price cannot be counted: held as reached, saying so — never spent past unseen.
    fn hold_to_budget(&mut self, id: &str, budget: &Budget, usage: &AgentUsage, now: Millis) {
        match judge(budget, usage) {
            Verdict::Within => {}
            Verdict::Near => self.warn_of_budget(id, now),
            Verdict::Reached(evidence) => self.hold_at_budget(id, evidence, now),
        }
    }

    /// Held: its turn interrupted, `needs_you` with `evidence`.
    fn hold_at_budget(&mut self, id: &str, evidence: String, now: Millis) {
        self.registry.edit(id, |a| {
            if let Some(b) = a.budget.as_mut() {
                b.reached = true;
                b.warned = true;
            }
        });
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
    }

    /// The 80 % notice.
    fn warn_of_budget(&mut self, id: &str, now: Millis) {
        self.registry.edit(id, |a| {
            if let Some(b) = a.budget.as_mut() {
                b.warned = true;
            }
        });
        self.notify(id, Kind::Budget, now);
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
        let usage = agent.usage.clone().unwrap_or_default();
        let limit = match (change, agent.budget.as_ref().map(Budget::limit)) {
            (BudgetChange::Off, _) => None,
            (BudgetChange::Add(n), Some(Amount::Tokens(m))) => {
                Some(Amount::Tokens(m.saturating_add(n)))
            }
            // No budget in tokens yet: N more than it used.
            (BudgetChange::Add(n), _) => Some(Amount::Tokens(usage.counted().saturating_add(n))),
            (BudgetChange::Set(n), _) => Some(Amount::Tokens(n)),
            (BudgetChange::AddUsd(c), Some(Amount::Usd(l))) => Some(Amount::Usd(l + c)),
            // No budget in money yet: that much more than it cost — which needs its price.
            (BudgetChange::AddUsd(c), _) if usage.counted() == 0 => Some(Amount::Usd(c)),
            (BudgetChange::AddUsd(c), _) => match usage.cost_usd {
                Some(cost) => Some(Amount::Usd(cost + c)),
                None => {
                    return Err(RequestError::User {
                        message: format!(
                            "agent {} ({}): what it spent is unknown (no price for model {}), so \
                             a budget in money cannot be counted",
                            agent.id,
                            agent.name,
                            usage.model.as_deref().unwrap_or("(unknown)")
                        ),
                        hints: vec![format!(
                            "give it a budget in tokens: volee budget {} +50k",
                            agent.id
                        )],
                    })
                }
            },
            (BudgetChange::SetUsd(c), _) => Some(Amount::Usd(c)),
        };
        if limit.is_some_and(|l| l.is_zero()) {
            return Err(RequestError::user("a budget of nothing: use off"));
        }
        let budget = limit.map(Budget::new);
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
            self.hold_to_budget(&id, &budget, &usage, now);
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
                    "agent {} ({}) reached its budget ({}): nothing is typed into it",
                    a.id,
                    a.name,
                    used_text(b, a.usage.as_ref()),
                ),
                hints: vec![format!(
                    "raise it: volee budget {} +AMOUNT (e.g. +50k, +2usd), or take it off: volee budget {} off",
                    a.id, a.id
                )],
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cost_usd: Option<f64>) -> AgentUsage {
        AgentUsage {
            input,
            output: 10,
            cache_read: 5_000,
            cache_write: 0,
            requests: Some(1),
            model: Some("claude-opus-5-5".into()),
            source: "transcript".into(),
            cost_usd,
        }
    }

    #[test]
    fn a_token_budget_warns_at_80_and_holds_at_100_percent_once() {
        let mut b = Budget::new(Amount::Tokens(1000));
        assert_eq!(judge(&b, &usage(700, None)), Verdict::Within);
        assert_eq!(judge(&b, &usage(790, None)), Verdict::Near);
        b.warned = true;
        assert_eq!(judge(&b, &usage(790, None)), Verdict::Within);
        assert_eq!(
            judge(&b, &usage(1200, None)),
            Verdict::Reached("budget reached: 1210 of 1000 tokens".into())
        );
        b.reached = true;
        assert_eq!(judge(&b, &usage(1500, None)), Verdict::Within);
    }

    #[test]
    fn a_money_budget_counts_the_cost_and_holds_when_it_cannot_be_counted() {
        let b = Budget::new(Amount::Usd(5.0));
        assert_eq!(judge(&b, &usage(100, Some(3.0))), Verdict::Within);
        assert_eq!(judge(&b, &usage(100, Some(4.2))), Verdict::Near);
        assert_eq!(
            judge(&b, &usage(100, Some(5.01))),
            Verdict::Reached("budget reached: $5.01 of $5.00".into())
        );
        // Spent at no known price: held, saying why — not let run on unseen.
        let mut unpriced = usage(100, None);
        unpriced.model = Some("gpt-test".into());
        match judge(&b, &unpriced) {
            Verdict::Reached(e) => assert!(
                e.contains("cannot be counted") && e.contains("gpt-test"),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
        // Nothing spent yet: nothing to judge.
        let none = AgentUsage::default();
        assert_eq!(judge(&b, &none), Verdict::Within);
        assert_eq!(
            used_text(&b, Some(&usage(1, Some(0.5)))),
            "$0.5000 of $5.00"
        );
        assert_eq!(used_text(&b, Some(&unpriced)), "? of $5.00");
    }
}
