/**
 * @koder/fleet-daemon: composes core and the adapters into the `koder-fleet` processes
 * (server, agent, box, hub, dev). Only wiring lives here: config, Layers, servers, signals.
 */
export * as Roles from "./Roles.js"
