//! The one rule of what a caller may see of its workspace: people and tokens of human roles see every
//! question and run in it; an `agent` token sees only the questions and runs it created ("agents read their own").
//! Every door asks this module: REST, the event stream (live and replayed), the web UI, the worker protocol and MCP.

use holdpoint_types::Role;
use uuid::Uuid;

/// What one caller may see: everything in its workspace, or only what one principal created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visibility {
    only_created_by: Option<Uuid>,
}

impl Visibility {
    /// The visibility of a caller with `role`, whose token or account id is `principal_id`.
    pub fn of(role: Role, principal_id: Uuid) -> Self {
        Visibility { only_created_by: (role == Role::Agent).then_some(principal_id) }
    }

    /// The creator a list must be narrowed to, if any: a store filter's `created_by`.
    pub fn created_by_filter(self) -> Option<Uuid> {
        self.only_created_by
    }

    /// Whether the caller sees a question or run whose creator is `created_by`.
    pub fn sees(self, created_by: Option<Uuid>) -> bool {
        self.only_created_by.is_none_or(|creator| created_by == Some(creator))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn people_and_tokens_of_human_roles_see_everything_in_their_workspace() {
        for role in Role::HUMAN {
            let visibility = Visibility::of(role, Uuid::now_v7());
            assert!(visibility.sees(Some(Uuid::now_v7())), "{role}");
            assert!(visibility.sees(None), "{role}: what the server itself created");
            assert_eq!(visibility.created_by_filter(), None);
        }
    }

    #[test]
    fn an_agent_token_sees_only_what_it_created() {
        let agent = Uuid::now_v7();
        let visibility = Visibility::of(Role::Agent, agent);
        assert!(visibility.sees(Some(agent)));
        assert!(!visibility.sees(Some(Uuid::now_v7())), "another agent's");
        assert!(!visibility.sees(None), "the server's own (a run's approvals are its creator's)");
        assert_eq!(visibility.created_by_filter(), Some(agent));
    }
}
