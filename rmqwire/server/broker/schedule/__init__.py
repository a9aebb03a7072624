"""Messages delivered later: delay levels (``delay``), 5.x timer messages (``timer``) and the put
hook that parks both (``hook``)."""

from rmqwire.server.broker.schedule.delay import ScheduleMessageService
from rmqwire.server.broker.schedule.hook import ScheduleHook
from rmqwire.server.broker.schedule.timer import TimerMessageStore

__all__ = ["ScheduleHook", "ScheduleMessageService", "TimerMessageStore"]
