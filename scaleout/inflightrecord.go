package scaleout

import (
	"context"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// MostTrialsInFlight reads, from the engine's record of a chunk workflow
// (its history), the most trial attempts of each task queue it had
// scheduled and not yet ended at once: what the chunk kept in flight per
// queue, whether a worker ran them or they waited on the queue for one.
func MostTrialsInFlight(ctx context.Context, cl client.Client, workflowID string) (map[string]int, error) {
	queueOf := map[int64]string{} // a trial attempt's scheduled event → its queue, while it is in flight
	now, most := map[string]int{}, map[string]int{}
	end := func(scheduled int64) {
		if q, ok := queueOf[scheduled]; ok {
			now[q]--
			delete(queueOf, scheduled)
		}
	}
	it := cl.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			if a.GetActivityType().GetName() != actRunTrial {
				continue
			}
			q := a.GetTaskQueue().GetName()
			queueOf[ev.GetEventId()] = q
			now[q]++
			most[q] = max(most[q], now[q])
		case enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			end(ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId())
		case enums.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			end(ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId())
		case enums.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			end(ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId())
		case enums.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			end(ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId())
		}
	}
	return most, nil
}
