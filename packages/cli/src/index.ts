/**
 * @koder/fleet-cli: `kfleet`, the command line. It talks to the API through core's typed client
 * and never imports the daemon.
 */
export const version = "0.1.0"
