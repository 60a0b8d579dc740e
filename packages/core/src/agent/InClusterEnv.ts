/**
 * The variables every container gets to find the API from inside the cluster, as the kubelet
 * sets them for the `kubernetes` Service: `KUBERNETES_SERVICE_HOST`/`_PORT` (what client-go's and
 * client-node's in-cluster config read), `_PORT_HTTPS`, and the Docker-link style
 * `KUBERNETES_PORT…` family. The address is the one the node itself reaches the API at: host-mode
 * pods share the node's network, where the Service's ClusterIP answers nothing, and an isolated
 * pod reaches the node's address as well. A pod's own variables win (ContainerSpec's defaultEnv).
 */

/** The variables for an API at `server` (an https URL); none when it is not one. */
export const fromServer = (server: string): Readonly<Record<string, string>> => {
  let url: URL
  try {
    url = new URL(server)
  } catch {
    return {}
  }
  if (url.protocol !== "https:" || url.hostname === "") return {}
  // URL keeps an IPv6 host in brackets; the variable holds the bare address, as Kubernetes'.
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
  const port = url.port === "" ? "443" : url.port
  const link = `tcp://${url.host.startsWith("[") ? `[${host}]` : host}:${port}`
  return {
    KUBERNETES_SERVICE_HOST: host,
    KUBERNETES_SERVICE_PORT: port,
    KUBERNETES_SERVICE_PORT_HTTPS: port,
    KUBERNETES_PORT: link,
    [`KUBERNETES_PORT_${port}_TCP`]: link,
    [`KUBERNETES_PORT_${port}_TCP_PROTO`]: "tcp",
    [`KUBERNETES_PORT_${port}_TCP_PORT`]: port,
    [`KUBERNETES_PORT_${port}_TCP_ADDR`]: host
  }
}
