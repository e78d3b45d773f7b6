"""The Kubernetes edge: the only code that talks to the API server.

Informers feed the core's ClusterState; the actuator carries out the core's decisions
(binds, status, nominations, evictions, events); leader election decides who may write.
"""
