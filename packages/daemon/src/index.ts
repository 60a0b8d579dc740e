/**
 * @koder/fleet-daemon: composes core and the adapters into the `koder-fleet` processes
 * (server, agent, box, hub, dev). Only wiring lives here: config, Layers, servers, signals.
 */
export * as Bootstrap from "./Bootstrap.js"
export * as DaemonError from "./DaemonError.js"
export * as HttpServer from "./HttpServer.js"
export * as Kubeconfig from "./Kubeconfig.js"
export * as Roles from "./Roles.js"
export * as Server from "./Server.js"
export * as Tls from "./Tls.js"
