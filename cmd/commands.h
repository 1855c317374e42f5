/* commands.h: one function per subcommand; each returns the process exit status. */
#ifndef BP_COMMANDS_H
#define BP_COMMANDS_H

int cmd_solve(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_dataset(int argc, char **argv);
int cmd_presets(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_propose(int argc, char **argv);
int cmd_view(int argc, char **argv);

#endif
