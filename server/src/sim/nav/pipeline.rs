//! The field pipeline: flow fields requested by the pre-pass, built off the tick by a host
//! ([`FieldJob`]) and handed back, or built on the tick they are due (see the module doc of
//! [`super`], **Field pipeline**).

use super::*;

/// A flow field to build off the tick thread: everything [`FlowField::build`] reads, and the
/// request's id. Plain data: how a host builds it, and how it tells a builder that the world no
/// longer waits for it, is the host's (the world only answers [`NavState::requested`] and
/// [`NavState::awaited`] by id).
#[derive(Debug, Clone)]
pub struct FieldJob {
    id: u64,
    grid: Arc<NavGrid>,
    goal_cell: usize,
    goal: Vec2,
}

impl FieldJob {
    /// The request's id (unique within the world).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Builds the field (identical to the one the tick would build).
    pub fn build(&self) -> FlowField {
        FlowField::build(&self.grid, self.goal_cell, self.goal)
    }

    /// Nav cells of the grid (the build's cost is linear in them).
    pub fn cells(&self) -> usize {
        self.grid.len()
    }
}

/// A requested field, used from tick `due`.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    /// The request's id ([`FieldJob::id`]).
    pub(super) id: u64,
    pub(super) goal: Vec2,
    pub(super) due: u64,
    pub(super) version: u64,
    pub(super) field: Option<Arc<FlowField>>,
}

/// Counters of the field pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Fields requested.
    pub requested: u64,
    /// Fields handed back by a builder in time.
    pub delivered: u64,
    /// Fields built on the tick they were due (no builder, or the builder was late).
    pub built_on_tick: u64,
}

/// How many flow fields a tick may ask for, and how soon they are due (the world's settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldBudget {
    /// Requests per tick (`flow_builds_per_tick`).
    pub max_builds: usize,
    /// Ticks between a request and the field's use (`flow_build_ticks`; 0 builds it now).
    pub latency: u64,
    /// Largest group whose agents head straight for a goal they all see, with no field
    /// (`move_to.straight_line_max_agents`).
    pub straight_max: u32,
    /// Nav cells of field building per tick (`flow_build_cells_per_tick`).
    pub cells_per_tick: u64,
}

impl NavState {
    /// The fields requested since the last tick's pre-pass, to build off the tick thread and
    /// hand back with [`NavState::deliver`]. Jobs not taken before the next pre-pass are
    /// dropped (their fields are then built on the tick they are due).
    pub fn take_jobs(&mut self) -> Vec<FieldJob> {
        std::mem::take(&mut self.jobs)
    }

    /// Hands back a field built from a [`FieldJob`]. Ignored unless it is still awaited (same
    /// goal cell, goal and grid version).
    pub fn deliver(&mut self, field: FlowField) {
        let Ok(gc) = u32::try_from(field.goal_cell()) else { return };
        if let Some(p) = self.pending.get_mut(&gc) {
            if p.field.is_none() && p.version == field.grid_version() && p.goal == field.goal() {
                p.field = Some(Arc::new(field));
            }
        }
    }

    /// Requested fields not yet in use.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// True when the field of `goal_cell` is requested and not in use yet.
    pub fn is_pending(&self, goal_cell: u32) -> bool {
        self.pending.contains_key(&goal_cell)
    }

    /// Ids of the requests whose fields the pre-pass of tick `tick` will need and that have not
    /// been handed back: a host decides per request whether to wait for its builder or let the
    /// tick build the field.
    pub fn awaited(&self, tick: u64) -> Vec<u64> {
        self.pending.values().filter(|p| p.due <= tick && p.field.is_none()).map(|p| p.id).collect()
    }

    /// Whether request `id` is still waiting for its field: false once it was handed back,
    /// built on its due tick, or dropped (its goal no longer needed, or the grid changed), after
    /// which a host need not build it.
    pub fn requested(&self, id: u64) -> bool {
        self.pending.values().any(|p| p.id == id && p.field.is_none())
    }

    /// Counters of the field pipeline.
    pub fn pipeline_stats(&self) -> PipelineStats {
        self.pipeline
    }

    /// The goals that need a field, ascending goal cell: a cached field is used; a requested
    /// one due now is taken from its builder (or built now if the builder is late); others
    /// are requested, at most `max_builds` per tick and as the cell credit allows.
    pub(super) fn serve_fields(&mut self, users: Vec<(u32, Vec2, u64)>, tick: u64, budget: FieldBudget) {
        let FieldBudget { max_builds, latency, cells_per_tick, .. } = budget;
        let cells = self.grid.len() as u64;
        let cells_per_tick = cells_per_tick.max(1);
        let mut requests = 0;
        for (gc, goal, n) in users {
            if self.cache.contains(gc as usize) {
                self.cache.fetch(&self.grid, gc as usize, goal, n);
                continue;
            }
            if let Some(p) = self.pending.get(&gc) {
                if p.due > tick {
                    continue;
                }
                let Some(p) = self.pending.remove(&gc) else { continue };
                let field = match p.field {
                    Some(f) => {
                        self.pipeline.delivered += 1;
                        f
                    }
                    None => {
                        self.pipeline.built_on_tick += 1;
                        Arc::new(FlowField::build(&self.grid, gc as usize, p.goal))
                    }
                };
                self.cache.insert(field, n);
                continue;
            }
            if requests >= max_builds || self.credit < cells {
                continue;
            }
            requests += 1;
            self.credit -= cells;
            self.pipeline.requested += 1;
            if latency == 0 {
                self.pipeline.built_on_tick += 1;
                self.cache.fetch(&self.grid, gc as usize, goal, n);
                continue;
            }
            let id = self.next_request;
            self.next_request += 1;
            let version = self.grid.version();
            let due = tick + latency.max(cells.div_ceil(cells_per_tick));
            self.pending.insert(gc, Pending { id, goal, due, version, field: None });
            self.jobs.push(FieldJob { id, grid: self.grid.clone(), goal_cell: gc as usize, goal });
        }
    }
}
