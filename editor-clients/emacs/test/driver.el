;;; driver.el --- Batch driver for the Emacs client test  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/test_emacs_client.py as
;;   emacs --batch -Q -l driver.el
;; with these environment variables:
;;   CA_TEST_SERVER     JSON array: the server command
;;   CA_TEST_FILE       the rule-engine file to open (under .codebolt/)
;;   CA_TEST_YAML       a YAML definition file of the same workspace
;;   CA_TEST_REQUEST    an assembly request (JSON file)
;;   CA_TEST_REQUEST2   a request with false, null and {} values
;;   CA_TEST_OUTPUT     where to write the results (JSON)
;;   CA_TEST_TIMEOUT    seconds to wait for the server and diagnostics
;; It loads context-assembly.el from the parent directory, opens the
;; file (the package's hook starts Eglot), waits for Flymake
;; diagnostics, asks for completion and hover, runs
;; `context-assembly-evaluate-rules', and writes what it saw.  Every
;; failure is recorded under "error" rather than aborting, so the test
;; can say what went wrong; Emacs always exits after writing.

;;; Code:

(require 'cl-lib)
(require 'subr-x)

(defvar ca-test-results (make-hash-table :test #'equal))
(defvar ca-test-steps nil)
(defconst ca-test-dir (file-name-directory (or load-file-name buffer-file-name)))

(defun ca-test-put (key value) (puthash key value ca-test-results))

(defun ca-test-bool (value) (if value t :false))

(defun ca-test-step (name)
  (push name ca-test-steps)
  (message "[driver] %s" name))

(defun ca-test-write ()
  (ca-test-put "steps" (vconcat (reverse ca-test-steps)))
  (let ((coding-system-for-write 'utf-8-unix))
    (with-temp-file (getenv "CA_TEST_OUTPUT")
      (insert (json-serialize ca-test-results :null-object :null :false-object :false)))))

(defun ca-test-wait (predicate seconds &optional every)
  "Poll PREDICATE for up to SECONDS; run EVERY before each poll.  Return its value."
  (let ((deadline (+ (float-time) seconds)) value)
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (when every (funcall every))
      (accept-process-output nil 0.1)
      (sit-for 0.1))
    value))

(defun ca-test-position (regexp &optional offset)
  "The LSP position OFFSET characters after the end of REGEXP's first match."
  (save-excursion
    (goto-char (point-min))
    (re-search-forward regexp)
    (forward-char (or offset 0))
    (list :line (1- (line-number-at-pos)) :character (- (point) (line-beginning-position)))))

(defun ca-test-uri ()
  (funcall (if (fboundp 'eglot-path-to-uri) 'eglot-path-to-uri 'eglot--path-to-uri)
           buffer-file-name))

(defun ca-test-hover-text (contents)
  "Text of a hover's CONTENTS (MarkupContent, MarkedString or an array of them)."
  (cond ((stringp contents) contents)
        ((vectorp contents) (mapconcat #'ca-test-hover-text contents "\n"))
        ((plist-get contents :value))
        (t (format "%S" contents))))

(defun ca-test-encode (object)
  "OBJECT as the JSON text jsonrpc sends."
  (if (fboundp 'jsonrpc--json-encode)
      (jsonrpc--json-encode object)
    (json-serialize object :false-object :json-false :null-object nil)))

(defvar ca-test-configuration-reply nil
  "The JSON text of the first reply to workspace/configuration.")

(defun ca-test-record-reply (_connection &rest args)
  "Remember the reply to the server's workspace/configuration request (ARGS)."
  (let ((result (plist-get args :result)))
    (when (and (null ca-test-configuration-reply) (vectorp result) (> (length result) 0)
               (not (plist-member args :method)))
      (setq ca-test-configuration-reply (ca-test-encode result)))))

(defun ca-test-eglot-version ()
  (or (ignore-errors
        (require 'lisp-mnt)
        (with-temp-buffer
          (insert-file-contents (find-library-name "eglot"))
          (lm-version)))
      "unknown"))

(defun ca-test-run ()
  (ca-test-step "versions")
  (ca-test-put "emacs_version" emacs-version)
  ;; -Q activates no packages and skips the site start-up files, which on
  ;; Debian is what puts the elpa-* packages (site-lisp/elpa next to the
  ;; data directory) on `package-directory-list'.  Add that directory and
  ;; activate the packages, so Eglot is found whether it is built in
  ;; (Emacs 29+), from Debian (elpa-eglot) or from ELPA (~/.emacs.d/elpa).
  (require 'package)
  (let ((site-elpa (expand-file-name "../../site-lisp/elpa" data-directory)))
    (when (file-directory-p site-elpa)
      (add-to-list 'package-directory-list site-elpa t)))
  (package-initialize)
  (unless (require 'eglot nil t)
    (error "Eglot is not installed (apt-get install emacs-nox elpa-eglot)"))
  (ca-test-put "eglot_version" (ca-test-eglot-version))
  (ca-test-put "jsonrpc_version" (or (ignore-errors
                                       (with-temp-buffer
                                         (insert-file-contents (find-library-name "jsonrpc"))
                                         (lm-version)))
                                     "unknown"))
  (ca-test-step "load package")
  (load (expand-file-name "../context-assembly.el" ca-test-dir) nil t)
  (setq context-assembly-server-command
        (append (json-parse-string (getenv "CA_TEST_SERVER") :array-type 'list) nil))
  (setq context-assembly-settings '(:pipeline_timeout_ms 20000 :snapshots :json-false))
  (advice-add 'jsonrpc-connection-send :before #'ca-test-record-reply)
  (setq eglot-sync-connect 30 eglot-connect-timeout 60
        flymake-no-changes-timeout nil)
  (ca-test-put "json_parent_mode" (symbol-name (symbol-function 'context-assembly--json-parent-mode)))

  (ca-test-step "open file")
  (let ((timeout (string-to-number (or (getenv "CA_TEST_TIMEOUT") "30"))))
    (find-file (getenv "CA_TEST_FILE"))
    (ca-test-put "major_mode" (symbol-name major-mode))
    ;; The mode hook called `eglot-ensure', which connects after the next
    ;; command; in batch there is no command loop, so run that hook here.
    (ca-test-step "start eglot")
    (run-hooks 'post-command-hook)
    (unless (ca-test-wait (lambda () (bound-and-true-p eglot--managed-mode)) timeout)
      (error "Eglot did not start managing the buffer within %s s" timeout))
    (let ((server (eglot-current-server)))
      (ca-test-put "server_is_ours" (ca-test-bool (eq (context-assembly-server t) server)))
      (ca-test-put "project_root" (expand-file-name (project-root (eglot--project server))))
      (ca-test-put "server_command" (vconcat (process-command (jsonrpc--process server))))

      (ca-test-step "diagnostics")
      (let ((_diags (ca-test-wait
                    (lambda ()
                      (cl-remove-if-not
                       (lambda (d) (string-match-p "equal" (flymake-diagnostic-text d)))
                       (flymake-diagnostics)))
                    timeout
                    (lambda () (when (bound-and-true-p flymake-mode) (flymake-start))))))
        (ca-test-put "diagnostics"
                     (vconcat
                      (mapcar (lambda (d)
                                (let ((beg (flymake-diagnostic-beg d)) (end (flymake-diagnostic-end d)))
                                  (list :message (flymake-diagnostic-text d)
                                        :type (symbol-name (flymake-diagnostic-type d))
                                        :line (line-number-at-pos beg)
                                        :text (buffer-substring-no-properties beg end))))
                              (flymake-diagnostics)))))

      (ca-test-step "workspace configuration")
      ;; The server asks for section contextAssembly after `initialized'.
      (ca-test-put "configuration_answer"
                   (or (ca-test-wait (lambda () ca-test-configuration-reply) timeout) :null))

      (ca-test-step "completion")
      (let* ((result (jsonrpc-request server :textDocument/completion
                                      (list :textDocument (list :uri (ca-test-uri))
                                            :position (ca-test-position "\"scope\\.agent\\."))))
             (items (if (vectorp result) result (plist-get result :items))))
        (ca-test-put "completion_labels"
                     (vconcat (mapcar (lambda (item) (plist-get item :label)) items))))

      (ca-test-step "hover")
      (let ((hover (jsonrpc-request server :textDocument/hover
                                    (list :textDocument (list :uri (ca-test-uri))
                                          :position (ca-test-position "\"operator\": \"eq\"" -2)))))
        (ca-test-put "hover" (if hover (ca-test-hover-text (plist-get hover :contents)) :null)))

      (ca-test-step "evaluateRules")
      (let ((result (context-assembly-evaluate-rules (getenv "CA_TEST_REQUEST"))))
        (ca-test-put "evaluate_matched" (vconcat (plist-get result :matched_memories)))
        ;; What the interactive command shows.
        (context-assembly--show result "contextAssembly/evaluateRules")
        (ca-test-put "shown" (with-current-buffer context-assembly-result-buffer
                               (buffer-substring-no-properties (point-min) (min (point-max) 2000)))))

      (ca-test-step "evaluateRules with false, null and {}")
      (let* ((request (context-assembly-read-request (getenv "CA_TEST_REQUEST2")))
             (wire (ca-test-encode request))
             (result (with-temp-buffer
                       (insert-file-contents (getenv "CA_TEST_REQUEST2"))
                       (context-assembly-evaluate-rules (current-buffer) server)))
             (conditions
              (cl-loop for engine across (plist-get result :engine_results)
                       append (cl-loop for rule across (plist-get engine :rules)
                                       when (equal (plist-get rule :rule_id) "false-and-null")
                                       append (cl-loop for c across (plist-get rule :conditions)
                                                       collect (list :field (plist-get c :field)
                                                                     :actual_is_false (ca-test-bool (eq (plist-get c :actual) :json-false))
                                                                     :result (ca-test-bool (eq (plist-get c :result) t))))))))
        (ca-test-put "wire_request" wire)
        (ca-test-put "evaluate2_matched" (vconcat (plist-get result :matched_memories)))
        (ca-test-put "evaluate2_conditions" (vconcat conditions)))

      (ca-test-step "yaml")
      (with-current-buffer (find-file-noselect (getenv "CA_TEST_YAML"))
        (ca-test-put "yaml_mode" (symbol-name major-mode))
        (run-hooks 'post-command-hook)
        (ca-test-wait (lambda () (bound-and-true-p eglot--managed-mode)) timeout)
        (ca-test-put "yaml_same_server" (ca-test-bool (eq (eglot-current-server) server))))

      (ca-test-step "shutdown")
      (let ((process (jsonrpc--process server)))
        (ignore-errors (eglot-shutdown server nil 10))
        (ca-test-put "server_exited"
                     (if (ca-test-wait (lambda () (not (process-live-p process))) 10) t :false))
        (when (process-live-p process) (delete-process process)))))
  (ca-test-put "ok" t))

(condition-case err
    (ca-test-run)
  (error (ca-test-put "error" (error-message-string err))))
(ca-test-write)
(kill-emacs 0)

;;; driver.el ends here
