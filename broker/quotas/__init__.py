"""Client quotas enforced on the broker (KIP-13, KIP-124, KIP-219), on the quotas the metadata
log holds (metadata/quotas.py): producer_byte_rate, consumer_byte_rate and request_percentage
for users, client ids, both, and their defaults.

| module | what it holds |
|---|---|
| `rate.py` | `Rate` over a `QuotaWindow`: Kafka's sampled rate (quota.window.num x .size.seconds) |
| `client_quotas.py` | `ClientQuotaManager`: Kafka's match order, sensors, throttle time |
| `loop_time.py` | `LoopTimed`: the event-loop time of a request's own steps |
| `request_quotas.py` | `ClientQuotas` (the three, per image), `RequestQuotas` (one request) |

broker/kafka/apis.py records each request and puts the throttle in its answer; the listener
(broker/kafka/server.py) then reads nothing more from that connection for that long.
"""

from broker.quotas.client_quotas import ClientQuotaManager, quota_user
from broker.quotas.loop_time import LoopTimed
from broker.quotas.rate import QuotaWindow, Rate
from broker.quotas.request_quotas import ClientQuotas, RequestQuotas

__all__ = [
    "ClientQuotaManager",
    "ClientQuotas",
    "LoopTimed",
    "QuotaWindow",
    "Rate",
    "RequestQuotas",
    "quota_user",
]
