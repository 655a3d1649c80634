/* SPDX-License-Identifier: MIT */
/*
 * t_dir.h - test helper: clear a scratch folder a test made (mkdtemp)
 * for the files it creates there. Only for such folders: it removes what
 * it finds without asking.
 */
#ifndef KVR_T_DIR_H
#define KVR_T_DIR_H

/*
 * t_dir_empty - remove every entry of @d: files, links, FIFOs and empty
 * subfolders (a link is removed, never followed). @d itself stays; a
 * missing @d is fine.
 */
void t_dir_empty(const char *d);

/* t_dir_remove - t_dir_empty(), then the folder itself. */
void t_dir_remove(const char *d);

#endif /* KVR_T_DIR_H */
