"""ApiVersions (key 18), v0-v4.

Contract: the response lists every advertised API in ``API_TABLE`` with its
range. The response header is always v0, even for flexible v3+ (the client
cannot know the broker's header version before this answer); the worker
takes care of that. An ApiVersions version outside 0-4 is answered in v0
format with UNSUPPORTED_VERSION (35) and our range (see worker.handle_request).
Tagged fields (supported/finalized features) stay at their defaults and so
are not written: librdkafka 2.0.2 cannot parse a v3 response where
FinalizedFeaturesEpoch=-1 is followed by another tag.
"""

from kafkapy.protocol.api import API_TABLE, API_VERSIONS_KEY
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.handlers import construct

API_KEY = API_VERSIONS_KEY


def build_response(version: int, error_code: int = ErrorCode.NONE):
    cls = API_TABLE[API_KEY].response_class(version)
    return construct(cls, {
        "error_code": int(error_code),
        "api_keys": [
            {"api_key": s.api_key, "min_version": s.min_version, "max_version": s.max_version}
            for s in sorted(API_TABLE.values(), key=lambda s: s.api_key) if s.advertised
        ],
        "throttle_time": 0,
    })


def handle(ctx, request):
    return build_response(ctx.api_version)
