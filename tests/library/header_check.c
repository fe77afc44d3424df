/* attntune/attntune_c.h compiled alone as C11 with -Werror (tests/library/CMakeLists.txt). */
#include <attntune/attntune_c.h>

int main(void) {
  attntune_problem problem = attntune_problem_init();
  attntune_tensors tensors = attntune_tensors_init();
  attntune_run_options run = attntune_run_options_init();
  attntune_config_options options = attntune_config_options_init();
  attntune_error error;
  attntune_configuration* config = 0;
  attntune_status status = attntune_config_create("dense", "tiled", "", "", &config, &error);
  (void)options;
  if (status == ATTNTUNE_OK) status = attntune_run(config, &problem, &tensors, &run, &error);
  attntune_config_free(config);
  return (int)status;
}
