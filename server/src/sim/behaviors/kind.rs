//! `BehaviorKind`: which behaviour, without its parameters (what `RemoveBehavior` names).

/// The kinds of the behaviour catalogue, one per [`super::Behavior`] variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BehaviorKind {
    Seek,
    Flee,
    Arrive,
    Pursue,
    Evade,
    Align,
    Face,
    LookWhereYouAreGoing,
    VelocityMatch,
    Wander,
    RandomTarget,
    ObstacleAvoidance,
    AheadAvoidance,
    WallAvoidance,
    AgentAvoidance,
    Separation,
    Cohesion,
    Alignment,
    PathFollowing,
    LeaderFollowing,
    ReciprocalAvoidance,
}

impl BehaviorKind {
    /// Every kind, in catalogue order.
    pub const ALL: &'static [BehaviorKind] = &[
        BehaviorKind::Seek,
        BehaviorKind::Flee,
        BehaviorKind::Arrive,
        BehaviorKind::Pursue,
        BehaviorKind::Evade,
        BehaviorKind::Align,
        BehaviorKind::Face,
        BehaviorKind::LookWhereYouAreGoing,
        BehaviorKind::VelocityMatch,
        BehaviorKind::Wander,
        BehaviorKind::RandomTarget,
        BehaviorKind::ObstacleAvoidance,
        BehaviorKind::AheadAvoidance,
        BehaviorKind::WallAvoidance,
        BehaviorKind::AgentAvoidance,
        BehaviorKind::Separation,
        BehaviorKind::Cohesion,
        BehaviorKind::Alignment,
        BehaviorKind::PathFollowing,
        BehaviorKind::LeaderFollowing,
        BehaviorKind::ReciprocalAvoidance,
    ];

    /// Stable snake_case name (the wire's, and a recording's).
    pub fn name(self) -> &'static str {
        match self {
            BehaviorKind::Seek => "seek",
            BehaviorKind::Flee => "flee",
            BehaviorKind::Arrive => "arrive",
            BehaviorKind::Pursue => "pursue",
            BehaviorKind::Evade => "evade",
            BehaviorKind::Align => "align",
            BehaviorKind::Face => "face",
            BehaviorKind::LookWhereYouAreGoing => "look_where_you_are_going",
            BehaviorKind::VelocityMatch => "velocity_match",
            BehaviorKind::Wander => "wander",
            BehaviorKind::RandomTarget => "random_target",
            BehaviorKind::ObstacleAvoidance => "obstacle_avoidance",
            BehaviorKind::AheadAvoidance => "ahead_avoidance",
            BehaviorKind::WallAvoidance => "wall_avoidance",
            BehaviorKind::AgentAvoidance => "agent_avoidance",
            BehaviorKind::Separation => "separation",
            BehaviorKind::Cohesion => "cohesion",
            BehaviorKind::Alignment => "alignment",
            BehaviorKind::PathFollowing => "path_following",
            BehaviorKind::LeaderFollowing => "leader_following",
            BehaviorKind::ReciprocalAvoidance => "reciprocal_avoidance",
        }
    }

    /// The kind named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for BehaviorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_read_back() {
        for (i, k) in BehaviorKind::ALL.iter().enumerate() {
            assert_eq!(BehaviorKind::from_name(k.name()), Some(*k));
            assert!(BehaviorKind::ALL[..i].iter().all(|o| o.name() != k.name()), "{k} twice");
        }
        assert_eq!(BehaviorKind::ALL.len(), 21);
        assert_eq!(BehaviorKind::from_name("séparation"), None);
    }
}
