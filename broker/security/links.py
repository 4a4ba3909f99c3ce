"""OutgoingSecurity: what a broker needs to open its own links securely, from its config:

- `inter_broker_tls` / `inter_broker_sasl`: followers fetching from leaders, when
  inter.broker.listener.name is SSL / SASL_* (its SASL user: sasl.inter.broker.username,
  sasl.inter.broker.password, sasl.mechanism.inter.broker.protocol);
- `controller_tls`: calls and the metadata log to the controllers, when
  controller.listener.names is mapped to SSL (not in a combined process, whose controller is
  in-process).

`reload()` re-reads the TLS files (SIGHUP, through BrokerServer.reload_tls). Any thread.
"""

from __future__ import annotations

import logging

from broker.listeners import Listeners
from client.config import setting
from client.config.loader import Config
from client.errors import ConfigError
from client.security.protocols import SASL_PROTOCOLS, TLS_PROTOCOLS, controller_protocol
from client.security.scram import SaslCredentials
from client.security.tls import ReloadableContext, TlsSettings

_log = logging.getLogger(__name__)


class OutgoingSecurity:
    def __init__(self, config: Config, listeners: Listeners, combined: bool) -> None:
        settings = TlsSettings.from_config(config)
        inter = listeners.inter_broker_protocol
        self.inter_broker_tls: ReloadableContext | None = None
        self.inter_broker_sasl: SaslCredentials | None = None
        self.controller_tls: ReloadableContext | None = None
        if inter in TLS_PROTOCOLS:
            self.inter_broker_tls = ReloadableContext(settings, server=False)
        if inter in SASL_PROTOCOLS:  # (Listeners checked that both are set)
            self.inter_broker_sasl = SaslCredentials(
                str(setting(config, "sasl_mechanism_inter_broker_protocol", "SCRAM-SHA-512")),
                str(setting(config, "sasl_inter_broker_username", "")),
                str(setting(config, "sasl_inter_broker_password", "")),
            )
        if not combined and controller_protocol(config) == "SSL":
            self.controller_tls = ReloadableContext(settings, server=False)

    def reload(self) -> bool:
        """Re-read the client TLS files; a failure keeps the previous context, is logged and
        returns False."""
        ok = True
        for ctx in (self.inter_broker_tls, self.controller_tls):
            if ctx is None:
                continue
            try:
                ctx.reload()
            except ConfigError as exc:
                _log.error("TLS reload failed, keeping the previous certificates: %s", exc)
                ok = False
        return ok
