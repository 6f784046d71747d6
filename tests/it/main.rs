//! The integration suite: one binary, a module per area. Every test runs the real orbit
//! binary and the real generated bash in temporary git repositories, with scripted fake
//! agents first on PATH, no network, and a timeout on every child.

mod audit;
mod cannot_run;
mod contract;
mod counts;
mod engines;
mod engines_more;
mod engines_net;
mod envelope;
mod evidence;
mod fanout;
mod feedback;
mod guards;
mod hidden;
mod holdout;
mod home;
mod hostile;
mod init;
mod layout;
mod logs;
mod manual;
mod naming;
mod net;
mod ops;
mod otlp;
mod perl;
mod projects;
mod protect;
mod recover;
mod reference;
mod reliability;
mod report;
mod rooms;
mod runner;
mod sandbox;
mod schedule;
mod schedule_held;
mod sealed;
mod serve;
mod setup;
mod smalls;
mod stopped;
mod subscripts;
mod support;
mod workspace;
