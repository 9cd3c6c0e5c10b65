//! The return and the reclaim: the workload back on-prem and the fallback reclaimed, even before the return when
//! consolidation moved it home on its own after a restore.

use super::moments::Moments;
use crate::timeline::{Event, Observation};

impl<'a> Moments<'a> {
    /// The workload seen back on-prem after a restore began and before the return started (a drain has no restore:
    /// never): its phase then ends where it starts.
    pub(super) fn back_before_return(&self) -> Option<&'a Observation> {
        self.ret?;
        self.scan.last_between(self.restore?.seq, self.ret_seq, |e| matches!(e, Event::BackOnPrem { .. }))
    }

    /// The fallback seen reclaimed to 0 after a restore began and before the return started, with no NodeClaim
    /// created between then and the return.
    pub(super) fn reclaimed_before_return(&self) -> Option<&'a Observation> {
        self.ret?;
        let empty = self.scan.last_between(self.restore?.seq, self.ret_seq, |e| matches!(e, Event::FallbackEmpty))?;
        let refilled = self.scan.last_between(empty.seq, self.ret_seq, |e| matches!(e, Event::NodeClaimCreated { .. }));
        refilled.is_none().then_some(empty)
    }
}
